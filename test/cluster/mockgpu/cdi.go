package mockgpu

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/rdma-dra/rdma-dra-driver/pkg/atomicfile"
)

// CDIClass is the class of the driver's CDI devices; their kind is DriverName/CDIClass.
const CDIClass = "gpu"

// Environment of a container that got GPUs of a claim.
const (
	// EnvBusIDs holds the bus IDs of the claim's GPUs, comma-separated, in allocation order.
	EnvBusIDs = "MOCK_GPU_BUS_IDS"
	// EnvRoots holds the PCIe root of each of those GPUs, in the same order.
	EnvRoots = "MOCK_GPU_ROOTS"
	// EnvBusIDPrefix followed by a GPU's index holds that GPU's bus ID
	// (MOCK_GPU_BUS_ID_3=0000:9a:00.0): the edit of the GPU's own CDI device, which CDI
	// requires to have one.
	EnvBusIDPrefix = "MOCK_GPU_BUS_ID_"
)

// specPerm lets the runtime and an operator read a spec.
const specPerm = 0o644

// SpecFileName is the base name of a claim's spec file, the CDI library's transient name.
func SpecFileName(claimUID string) string {
	return cdiapi.GenerateTransientSpecName(DriverName, CDIClass, claimUID) + ".json"
}

// SpecGlob matches the spec files of every claim in the directory dir.
func SpecGlob(dir string) string {
	return filepath.Join(dir, cdiapi.GenerateSpecName(DriverName, CDIClass)+"_*.json")
}

// BuildSpec returns the claim's spec: one CDI device per GPU, <claimUID>-<GPU name>, and
// claim-wide edits that set EnvBusIDs and EnvRoots; and the qualified CDI device IDs, one
// per GPU, in the order of gpus.
func BuildSpec(claimUID string, gpus []GPU) (*cdispec.Spec, []string, error) {
	if len(gpus) == 0 {
		return nil, nil, errors.New("claim has no GPUs")
	}
	spec := &cdispec.Spec{Kind: DriverName + "/" + CDIClass}
	ids := make([]string, 0, len(gpus))
	busIDs := make([]string, 0, len(gpus))
	roots := make([]string, 0, len(gpus))
	for _, g := range gpus {
		name := claimUID + "-" + g.Name
		if err := parser.ValidateDeviceName(name); err != nil {
			return nil, nil, fmt.Errorf("CDI device name of claim %q: %w", claimUID, err)
		}
		spec.Devices = append(spec.Devices, cdispec.Device{
			Name: name,
			ContainerEdits: cdispec.ContainerEdits{
				Env: []string{EnvBusIDPrefix + strconv.Itoa(g.Index) + "=" + g.BusID},
			},
		})
		ids = append(ids, parser.QualifiedName(DriverName, CDIClass, name))
		busIDs = append(busIDs, g.BusID)
		roots = append(roots, g.PCIeRoot)
	}
	spec.ContainerEdits.Env = []string{
		EnvBusIDs + "=" + strings.Join(busIDs, ","),
		EnvRoots + "=" + strings.Join(roots, ","),
	}
	version, err := cdispec.MinimumRequiredVersion(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("determine CDI version: %w", err)
	}
	spec.Version = version
	return spec, ids, nil
}

// Specs writes and removes the claims' spec files in one directory.
type Specs struct {
	// Dir is the CDI spec directory the container runtime reads, e.g. /var/run/cdi.
	Dir string
}

// Write writes the claim's spec (BuildSpec) atomically, so that the runtime sees the old
// file or the whole new one, and returns the CDI device IDs. Writing a claim again
// replaces its file.
func (s Specs) Write(claimUID string, gpus []GPU) ([]string, error) {
	spec, ids, err := BuildSpec(claimUID, gpus)
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode CDI spec: %w", err)
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create CDI spec directory: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(s.Dir, SpecFileName(claimUID)), append(data, '\n'), specPerm); err != nil {
		return nil, fmt.Errorf("write CDI spec: %w", err)
	}
	return ids, nil
}

// Remove removes the claim's spec file; a claim without one is not an error.
func (s Specs) Remove(claimUID string) error {
	err := os.Remove(filepath.Join(s.Dir, SpecFileName(claimUID)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove CDI spec: %w", err)
	}
	return nil
}
