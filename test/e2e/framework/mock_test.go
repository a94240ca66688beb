package framework

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// portDevices are the two devices the driver publishes for a port (exclusive and shared),
// with the port's ibdev and port attributes spelled short, as the plugin does, and shares
// of the port as the shared device's capacity.
func portDevices(ibdev string, port int64, shares int64) []resourceapi.Device {
	name := strings.ReplaceAll(ibdev, "_", "-") + fmt.Sprintf("-p%d", port)
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"ibdev": {StringValue: ptr.To(ibdev)},
		"port":  {IntValue: ptr.To(port)},
	}
	return []resourceapi.Device{
		{Name: name, Attributes: attrs},
		{Name: name + "-shared", Attributes: attrs, Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			sharesCapacity: {Value: *resource.NewQuantity(shares, resource.DecimalSI)},
		}},
	}
}

// modeDevice is a device with only the driver's mode attribute, as the legacy model has it.
func modeDevice(name, mode string) resourceapi.Device {
	return resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"mode": {StringValue: ptr.To(mode)},
	}}
}

// legacySlices is one ResourceSlice with n legacy single-share devices of each port.
func legacySlices(ports map[string]int) []resourceapi.ResourceSlice {
	var devs []resourceapi.Device
	for port, n := range ports {
		for k := 0; k < n; k++ {
			devs = append(devs, modeDevice(devicemodel.LegacyShareName(port, k), "shared"))
		}
	}
	return []resourceapi.ResourceSlice{{Spec: resourceapi.ResourceSliceSpec{Devices: devs}}}
}

// slicesOf is one ResourceSlice with the devices of the ports ("mlx5_0/1").
func slicesOf(shares int64, ports ...string) []resourceapi.ResourceSlice {
	var devs []resourceapi.Device
	for _, p := range ports {
		var ibdev string
		var port int64
		if _, err := fmt.Sscanf(strings.Replace(p, "/", " ", 1), "%s %d", &ibdev, &port); err != nil {
			panic(err)
		}
		devs = append(devs, portDevices(ibdev, port, shares)...)
	}
	return []resourceapi.ResourceSlice{{Spec: resourceapi.ResourceSliceSpec{Devices: devs}}}
}

// TestSuiteProfilePorts: the mock profile the suite's tests were written for has the ten
// ports they name, mlx5_0..mlx5_9 port 1.
func TestSuiteProfilePorts(t *testing.T) {
	p, err := mocknode.Lookup(SuiteMockProfile)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprintf("mlx5_%d/1", i))
	}
	slices.Sort(want)
	if got := profilePorts(p.Node().ExpectedPorts()); !slices.Equal(got, want) {
		t.Errorf("ports of %s = %v, want %v", SuiteMockProfile, got, want)
	}
}

func TestPublishedPorts(t *testing.T) {
	qualified := portDevices("mlx5_4", 1, 2)
	for i := range qualified {
		qualified[i].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			devicemodel.AttrIBDev: {StringValue: ptr.To("mlx5_4")},
			devicemodel.AttrPort:  {IntValue: ptr.To[int64](1)},
		}
	}
	tests := []struct {
		name   string
		slices []resourceapi.ResourceSlice
		want   []string
	}{
		{"each port once", slicesOf(2, "mlx5_1/1", "mlx5_0/1", "mlx5_0/2"), []string{"mlx5_0/1", "mlx5_0/2", "mlx5_1/1"}},
		{"qualified attribute names", []resourceapi.ResourceSlice{{Spec: resourceapi.ResourceSliceSpec{Devices: qualified}}}, []string{"mlx5_4/1"}},
		{"a device without ibdev is no port", []resourceapi.ResourceSlice{{Spec: resourceapi.ResourceSliceSpec{Devices: []resourceapi.Device{{Name: "gpu-0"}}}}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := publishedPorts(tc.slices); !slices.Equal(got, tc.want) {
				t.Errorf("publishedPorts = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOffersShares(t *testing.T) {
	mixed := slicesOf(2, "mlx5_0/1")
	mixed = append(mixed, slicesOf(4, "mlx5_1/1")...)
	tests := []struct {
		name    string
		slices  []resourceapi.ResourceSlice
		wantErr string
	}{
		{"every shared device offers them", slicesOf(2, "mlx5_0/1", "mlx5_1/1"), ""},
		{"one device still offers the old count", mixed, "mlx5-1-p1-shared offers 4 shares, want 2"},
		{"no shared device", []resourceapi.ResourceSlice{{Spec: resourceapi.ResourceSliceSpec{Devices: portDevices("mlx5_0", 1, 2)[:1]}}}, "no device with rdma.dra.io/shares capacity"},
		{"no slice", nil, "no device with rdma.dra.io/shares capacity nor legacy share devices published (0 slices)"},
		{"legacy: every port has its share devices", legacySlices(map[string]int{"mlx5-0-p1": 2, "mlx5-1-p1": 2}), ""},
		{"legacy: a port with one share device too few", legacySlices(map[string]int{"mlx5-0-p1": 2, "mlx5-1-p1": 1}), "mlx5-1-p1 has 1 legacy share devices, want 2"},
		{"legacy: a port with one too many", legacySlices(map[string]int{"mlx5-0-p1": 3}), "mlx5-0-p1 has 3 legacy share devices, want 2"},
		{"legacy exclusive devices offer no shares", []resourceapi.ResourceSlice{{Spec: resourceapi.ResourceSliceSpec{Devices: []resourceapi.Device{modeDevice("mlx5-0-p1", "exclusive")}}}}, "nor legacy share devices"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := offersShares(tc.slices, 2)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("offersShares: %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestSetFlag(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"image.tag=7605687", "--set-string"},
		{"image.tag=v0.1.0", "--set-string"},
		{"nodeConfig.shares=2", "--set"},
		{"nodeConfig.legacy.mode=exclusive", "--set"},
	} {
		if got := setFlag(tc.set); got != tc.want {
			t.Errorf("setFlag(%q) = %s, want %s", tc.set, got, tc.want)
		}
	}
}
