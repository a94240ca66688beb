package health

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Event reasons on the Node.
const (
	ReasonPortStateChanged = "RDMAPortStateChanged"
	ReasonPortAdded        = "RDMAPortAdded"
	ReasonPortRemoved      = "RDMAPortRemoved"
)

// EventRecorder is the part of client-go's record.EventRecorder the monitor uses.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// NodeRef refers to a Node the way the kubelet does (the UID is the name), so that
// `kubectl describe node` lists the events.
func NodeRef(nodeName string) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", Name: nodeName, UID: types.UID(nodeName)}
}

// emitEvents records one Node event per transition: a Warning when a port stops being
// usable, Normal otherwise.
func emitEvents(rec EventRecorder, node *corev1.ObjectReference, transitions []Transition) {
	for _, t := range transitions {
		eventType, reason := corev1.EventTypeNormal, ReasonPortStateChanged
		switch {
		case t.Kind == PortAdded:
			reason = ReasonPortAdded
			if !t.New.Healthy() {
				eventType = corev1.EventTypeWarning
			}
		case t.Kind == PortRemoved:
			eventType, reason = corev1.EventTypeWarning, ReasonPortRemoved
		case !t.New.Healthy():
			eventType = corev1.EventTypeWarning
		}
		rec.Eventf(node, eventType, reason, "%s", t.String())
	}
}
