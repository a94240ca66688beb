package health

import (
	"context"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// LinkEvent is what the watcher needs of one rtnetlink link message.
type LinkEvent struct {
	// Deleted is true for RTM_DELLINK: the netdev is gone.
	Deleted bool
	Index   int
	Name    string
	// Type is the link kind as netlink names it: "device" for physical functions,
	// "ipoib", "bond", "veth", "bridge", ...
	Type      string
	OperState string
	// Carrier is IFF_LOWER_UP.
	Carrier bool
	// MasterIndex is the bond (or bridge) the link is enslaved to, 0 if none.
	MasterIndex int
	MTU         int
}

// LinkSource delivers rtnetlink link events.
type LinkSource interface {
	// Subscribe starts a subscription. Events arrive on the channel until ctx ends or
	// the subscription fails, then it is closed. onError is told about problems that do
	// not end the subscription.
	Subscribe(ctx context.Context, onError func(error)) (<-chan LinkEvent, error)
}

// NetlinkSource subscribes to the host's rtnetlink link group (RTNLGRP_LINK) in the
// plugin's network namespace, the host's with hostNetwork.
type NetlinkSource struct{}

var _ LinkSource = NetlinkSource{}

// receiveBuffer is large enough for the burst of messages a driver reload or the
// creation of many VFs sends; an overflow (ENOBUFS) ends the subscription, and the
// watcher then resubscribes and rescans.
const receiveBuffer = 1 << 20

// Subscribe implements LinkSource.
func (NetlinkSource) Subscribe(ctx context.Context, onError func(error)) (<-chan LinkEvent, error) {
	updates := make(chan netlink.LinkUpdate, 64)
	done := make(chan struct{})
	err := netlink.LinkSubscribeWithOptions(updates, done, netlink.LinkSubscribeOptions{
		ErrorCallback:     onError,
		ReceiveBufferSize: receiveBuffer,
	})
	if err != nil {
		close(done)
		return nil, fmt.Errorf("subscribe to rtnetlink link events: %w", err)
	}
	out := make(chan LinkEvent, 64)
	go func() {
		defer close(out)
		// The library's receiver blocks sending on updates; after done it must be
		// drained until it closes the channel, or its goroutine leaks.
		stop := func() {
			close(done)
			for range updates {
				// Drained, not used.
			}
		}
		for {
			select {
			case <-ctx.Done():
				stop()
				return
			case u, ok := <-updates:
				if !ok {
					close(done)
					return
				}
				select {
				case out <- linkEvent(u):
				case <-ctx.Done():
					stop()
					return
				}
			}
		}
	}()
	return out, nil
}

func linkEvent(u netlink.LinkUpdate) LinkEvent {
	ev := LinkEvent{
		Deleted: u.Header.Type == unix.RTM_DELLINK,
		Index:   int(u.Index),
		Carrier: u.Flags&unix.IFF_LOWER_UP != 0,
	}
	if u.Link == nil {
		return ev
	}
	a := u.Link.Attrs()
	ev.Name, ev.Type, ev.OperState = a.Name, u.Link.Type(), a.OperState.String()
	ev.MasterIndex, ev.MTU = a.MasterIndex, a.MTU
	return ev
}
