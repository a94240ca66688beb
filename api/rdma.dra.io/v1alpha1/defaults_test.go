package v1alpha1

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func defaulted() *RdmaConfig {
	return &RdmaConfig{
		TypeMeta:    typeMeta(),
		CharDevices: ptr.To(CharDevicesDiagnostics),
		NCCLEnv:     ptr.To(true),
		GIDIndex:    ptr.To(GIDIndexAuto),
		Memlock:     ptr.To(MemlockUnset),
		Network: &NetworkConfig{
			Mode: ptr.To(NetworkModeNone), IPAM: ptr.To(IPAMNone),
			KeepHostAddress: ptr.To(false), SocketInterface: ptr.To(false),
		},
	}
}

func typeMeta() metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: "rdma.dra.io/v1alpha1", Kind: RdmaConfigKind}
}

func TestDefault(t *testing.T) {
	t.Run("empty", func(t *testing.T) {
		c := &RdmaConfig{}
		c.Default()
		if diff := cmp.Diff(defaulted(), c); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("set fields stay", func(t *testing.T) {
		c := &RdmaConfig{NCCLEnv: ptr.To(false), GIDIndex: ptr.To(GIDIndexPolicy("7"))}
		c.Default()
		want := defaulted()
		want.NCCLEnv, want.GIDIndex = ptr.To(false), ptr.To(GIDIndexPolicy("7"))
		if diff := cmp.Diff(want, c); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

func TestMerge(t *testing.T) {
	class := &RdmaConfig{CharDevices: ptr.To(CharDevicesVerbs), Memlock: ptr.To(MemlockUnlimited), GIDIndex: ptr.To(GIDIndexNone)}
	claim := &RdmaConfig{GIDIndex: ptr.To(GIDIndexPolicy("3")), NCCLEnv: ptr.To(false)}
	tests := []struct {
		name    string
		configs []*RdmaConfig
		want    func(*RdmaConfig)
	}{
		{"nothing", nil, func(*RdmaConfig) {}},
		{"only nils", []*RdmaConfig{nil, nil}, func(*RdmaConfig) {}},
		{"class only", []*RdmaConfig{class}, func(c *RdmaConfig) {
			c.CharDevices, c.Memlock, c.GIDIndex = ptr.To(CharDevicesVerbs), ptr.To(MemlockUnlimited), ptr.To(GIDIndexNone)
		}},
		{"claim over class", []*RdmaConfig{class, claim}, func(c *RdmaConfig) {
			c.CharDevices, c.Memlock = ptr.To(CharDevicesVerbs), ptr.To(MemlockUnlimited)
			c.GIDIndex, c.NCCLEnv = ptr.To(GIDIndexPolicy("3")), ptr.To(false)
		}},
		{"class over claim when passed last", []*RdmaConfig{claim, class}, func(c *RdmaConfig) {
			c.CharDevices, c.Memlock = ptr.To(CharDevicesVerbs), ptr.To(MemlockUnlimited)
			c.GIDIndex, c.NCCLEnv = ptr.To(GIDIndexNone), ptr.To(false)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := defaulted()
			tc.want(want)
			got := Merge(tc.configs...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	t.Run("result shares no memory", func(t *testing.T) {
		got := Merge(class, claim)
		*got.CharDevices, *got.GIDIndex = CharDevicesManagement, "9"
		if *class.CharDevices != CharDevicesVerbs || *claim.GIDIndex != "3" {
			t.Errorf("Merge result aliases its inputs")
		}
	})
}

// TestDeepCopyCoversEveryField sets every pointer field through reflection, so that a
// field added to RdmaConfig without a deep copy fails here.
func TestDeepCopyCoversEveryField(t *testing.T) {
	orig := &RdmaConfig{TypeMeta: typeMeta()}
	v := reflect.ValueOf(orig).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Struct:
			if v.Type().Field(i).Name != "TypeMeta" {
				t.Fatalf("field %s: unexpected struct; teach overlay (Merge) and this test about it", v.Type().Field(i).Name)
			}
		default:
			t.Fatalf("field %s: unexpected kind %s; teach overlay (Merge) and this test about it", v.Type().Field(i).Name, f.Kind())
		}
	}
	cp := orig.DeepCopy()
	if diff := cmp.Diff(orig, cp); diff != "" {
		t.Fatalf("copy differs (-orig +copy):\n%s", diff)
	}
	cv := reflect.ValueOf(cp).Elem()
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).Kind() == reflect.Pointer && v.Field(i).Pointer() == cv.Field(i).Pointer() {
			t.Errorf("field %s is shared between original and copy", v.Type().Field(i).Name)
		}
	}
	if obj, ok := orig.DeepCopyObject().(*RdmaConfig); !ok || obj == orig {
		t.Errorf("DeepCopyObject returned %T %p, want a new *RdmaConfig", obj, obj)
	}
	if (*RdmaConfig)(nil).DeepCopy() != nil {
		t.Errorf("nil.DeepCopy() != nil")
	}
}

func TestCharDeviceSets(t *testing.T) {
	tests := []struct {
		set        CharDeviceSet
		umad, issm bool
	}{
		{CharDevicesVerbs, false, false},
		{CharDevicesDiagnostics, true, false},
		{CharDevicesManagement, true, true},
		{"bogus", false, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.set), func(t *testing.T) {
			if tc.set.WantsUMAD() != tc.umad || tc.set.WantsISSM() != tc.issm {
				t.Errorf("umad=%v issm=%v, want %v %v", tc.set.WantsUMAD(), tc.set.WantsISSM(), tc.umad, tc.issm)
			}
		})
	}
}
