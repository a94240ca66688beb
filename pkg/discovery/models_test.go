package discovery

import "testing"

func TestModelName(t *testing.T) {
	tests := []struct {
		vendor, device, pf, want string
	}{
		{vendor: VendorMellanox, device: "1021", want: "ConnectX-7"},
		{vendor: VendorMellanox, device: "1023", want: "ConnectX-8"},
		{vendor: VendorMellanox, device: "1007", want: "ConnectX-3 Pro"},
		{vendor: VendorMellanox, device: "1015", want: "ConnectX-4 Lx"},
		{vendor: VendorMellanox, device: "1019", want: "ConnectX-5 Ex"},
		{vendor: VendorMellanox, device: "101f", want: "ConnectX-6 Lx"},
		{vendor: VendorMellanox, device: "1018", want: "ConnectX-5 VF"},
		{vendor: VendorMellanox, device: "101e", want: "ConnectX VF"},
		{vendor: VendorMellanox, device: "101e", pf: "ConnectX-7", want: "ConnectX-7 VF"},
		{vendor: VendorMellanox, device: "a2dc", want: "BlueField-3"},
		{vendor: VendorMellanox, device: "a2d6", want: "BlueField-2"},
		{vendor: VendorIntel, device: "1592", want: "E810-C"},
		{vendor: VendorIntel, device: "159b", want: "E810-XXV"},
		{vendor: VendorBroadcom, device: "1750", want: "NetXtreme-E BCM57508"},
		{vendor: VendorBroadcom, device: "16d7", want: "NetXtreme-E BCM57414"},
		{vendor: VendorMellanox, device: "ffff", want: ""},
		{vendor: "1af4", device: "1041", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.vendor+":"+tt.device+"/"+tt.pf, func(t *testing.T) {
			if got := modelName(tt.vendor, tt.device, tt.pf); got != tt.want {
				t.Errorf("modelName = %q, want %q", got, tt.want)
			}
		})
	}
}
