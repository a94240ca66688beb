// Package nccltopo writes the NCCL topology file (NCCL_TOPO_FILE) of one claim: where in
// the PCI tree its RDMA ports and its GPUs sit, read from sysfs, in the XML format NCCL
// loads before it detects the rest itself. The project's nccl-topology.md has the format,
// the NCCL sources each fact comes from, and the decisions below at length.
//
// What the file holds, and what it leaves to NCCL. NCCL loads the file first and then
// fills in only what is missing, so where both have a value the file's wins (NCCL always
// sets only a few: a net's dev, a cpu's host_hash, the class of the pci elements on the
// paths it walks); so the file states what NCCL cannot know better itself:
//
//   - <system version="1">, one <cpu> per NUMA node with numaid, affinity (the node's
//     cpumap), arch and, on x86, vendor, familyid and modelid: NCCL fills those only for
//     the cpu above its own GPU, and refuses a cpu that lacks them.
//   - for every endpoint, the chain of <pci> elements from below the root complex down to
//     the function, each with busid, class, the four PCI IDs, link_speed and link_width
//     (NCCL's own sysfs rule: the lower of max_link_* of the function and its parent).
//   - below a port's function a <nic> with one <net name="<ibdev>"/>; below its Data
//     Direct function, when it has one, a <nic> with <net name="<ibdev>_dma"/>, the net
//     NCCL makes of it. NCCL places a net by its name, so the file decides under which
//     PCI function it sits; a net NCCL does not detect is trimmed.
//   - no <gpu> element, and no other net attribute (dev, speed, port, guid, maxconn, gdr,
//     coll): NCCL fills every one of them from NVML and verbs, and a value in the file
//     would override its detection (gdr="1" would claim GPUDirect where NCCL's probe found
//     none, dev would override the NVML index).
//
// Ports of virtual devices (soft-RoCE) are skipped and reported in Result.Skipped; a
// claim with nothing else is ErrNothingToDescribe.
//
// Output is deterministic: elements sorted (cpus by NUMA node, pci by bus ID, nets in the
// order of the ports), attributes in the order NCCL dumps them, two-space indentation,
// no XML declaration (NCCL's parser refuses one).
//
// Tested against: NCCL's parser and topology code as read from its source (src/graph/xml.cc
// and topo.cc), through a schema test that parses the output with encoding/xml into types
// that accept only what that parser accepts, plus the lexical rules of NCCL's hand-written
// reader. NCCL's own parser is not run: xml.cc includes CUDA and NVML headers and cannot
// be built here without them.
package nccltopo
