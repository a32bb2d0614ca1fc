package p2p

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/meshllm/meshllm/cache"
)

// memberHost is one peer of a membership test: a host, its gater, its
// membership (nil for an outsider without one) and an infer service
// behind the membership's guard.
type memberHost struct {
	h   *Host
	g   *Gater
	m   *Membership
	svc *InferService
}

func newIdentity(t *testing.T) (crypto.PrivKey, peer.ID) {
	t.Helper()
	priv, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return priv, id
}

// transportConfig is testConfig on one transport only.
func transportConfig(quic bool) Config {
	c := testConfig(quic)
	if quic {
		c.ListenAddrs = []string{"/ip4/127.0.0.1/udp/0/quic-v1"}
	}
	return c
}

func startMember(t *testing.T, quic bool, priv crypto.PrivKey, allow []peer.ID, mc *MembershipConfig) *memberHost {
	t.Helper()
	cfg := transportConfig(quic)
	cfg.Identity = priv
	g := NewGater(allow)
	cfg.ConnectionGater = g
	mh := &memberHost{h: newTestHost(t, cfg), g: g}
	handler := func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
		return &InferFinal{PromptTokens: len(req.Prompt), FinishReason: "stop"}, nil
	}
	snaps := func(_ peer.ID, model string) ([]byte, bool) {
		d := testDigest(mh.h.ID(), cache.KindSnapshot, 1, 1, 5)
		d.Model = model
		b, err := d.MarshalBinary()
		return b, err == nil
	}
	if mc != nil {
		c := *mc
		c.Gater = g
		m, err := NewMembership(mh.h.LibP2P(), c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		mh.m = m
		handler = m.Guard(handler)
		snaps = m.GuardSnapshots(snaps)
	}
	snapsvc := NewSnapshotService(mh.h.LibP2P(), snaps)
	t.Cleanup(func() { _ = snapsvc.Close() })
	mh.svc = NewInferService(mh.h.LibP2P(), handler, InferServiceOptions{})
	t.Cleanup(func() { _ = mh.svc.Close() })
	return mh
}

func (a *memberHost) connect(b *memberHost) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return a.h.LibP2P().Connect(ctx, peer.AddrInfo{ID: b.h.ID(), Addrs: b.h.LibP2P().Addrs()})
}

func (a *memberHost) infer(b *memberHost) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := NewInferClient(a.h.LibP2P(), InferClientOptions{}).Infer(ctx, b.h.ID(), &InferRequest{ModelID: "m", Prompt: []int32{1, 2}}, nil)
	return err
}

// snapshot pulls b's digest snapshot.
func (a *memberHost) snapshot(b *memberHost) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := FetchSnapshot(ctx, a.h.LibP2P(), b.h.ID(), testModel)
	return err
}

func forTransports(t *testing.T, f func(t *testing.T, quic bool)) {
	for _, quic := range []bool{false, true} {
		name := "tcp"
		if quic {
			name = "quic"
		}
		t.Run(name, func(t *testing.T) { f(t, quic) })
	}
}

// TestAllowlistRefusesOutsiders: members on each other's allowlist
// connect and serve each other; an outsider is refused when it dials a
// member (at the security handshake) and when a member dials it.
func TestAllowlistRefusesOutsiders(t *testing.T) {
	forTransports(t, func(t *testing.T, quic bool) {
		pa, ida := newIdentity(t)
		pb, idb := newIdentity(t)
		po, _ := newIdentity(t)
		allow := []peer.ID{ida, idb}
		mc := &MembershipConfig{}
		a := startMember(t, quic, pa, allow, mc)
		b := startMember(t, quic, pb, allow, mc)
		o := startMember(t, quic, po, nil, nil)

		if err := a.connect(b); err != nil {
			t.Fatalf("member to member: %v", err)
		}
		if err := a.infer(b); err != nil {
			t.Fatalf("member's request: %v", err)
		}
		// The outsider's dial may complete on its side (the member refuses
		// after the security handshake, when it learns the peer ID), but
		// the connection is closed at once and carries nothing.
		_ = o.connect(a)
		var ie *InferError
		if err := o.infer(a); err == nil || errors.As(err, &ie) {
			t.Fatalf("outsider's request reached the service: %v", err)
		}
		if err := a.connect(o); err == nil {
			t.Fatal("member connected to an outsider")
		}
		waitFor(t, 5*time.Second, "the outsider to be disconnected", func() bool {
			return !connected(a.h, o.h.ID()) && !connected(o.h, a.h.ID())
		})
		if a.g.Refused() == 0 {
			t.Fatal("the gater counted no refusal")
		}
		if !a.m.IsMember(idb) || a.m.IsMember(o.h.ID()) {
			t.Fatal("membership disagrees with the allowlist")
		}
	})
}

// TestSecretHandshake: peers holding the mesh key (here derived from a
// passphrase) prove it to each other and serve each other on real
// hosts; a peer with another key is disconnected at the handshake and
// blocked; a peer that never answers the handshake gets nothing while
// connected and is disconnected at the timeout.
func TestSecretHandshake(t *testing.T) {
	key, err := MeshKeyFromPassphrase([]byte("correct horse battery staple"))
	if err != nil {
		t.Fatal(err)
	}
	forTransports(t, func(t *testing.T, quic bool) {
		mc := &MembershipConfig{Key: key, HandshakeTimeout: 2 * time.Second}
		pa, ida := newIdentity(t)
		pb, idb := newIdentity(t)
		pw, idw := newIdentity(t)
		ps, ids := newIdentity(t)
		a := startMember(t, quic, pa, nil, mc)
		b := startMember(t, quic, pb, nil, mc)
		wrong := startMember(t, quic, pw, nil, &MembershipConfig{Key: GenerateMeshKey()})
		silent := startMember(t, quic, ps, nil, nil) // speaks no handshake

		if err := b.connect(a); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "members to prove themselves", func() bool {
			return a.m.IsMember(idb) && b.m.IsMember(ida)
		})
		if err := a.infer(b); err != nil {
			t.Fatalf("member's request: %v", err)
		}
		if err := b.infer(a); err != nil {
			t.Fatalf("member's request: %v", err)
		}
		if err := b.snapshot(a); err != nil {
			t.Fatalf("member's snapshot pull: %v", err)
		}

		// Wrong key, dialing a member: the member refuses its proof.
		_ = wrong.connect(a)
		waitFor(t, 10*time.Second, "the wrong-secret peer to be disconnected", func() bool {
			return !connected(a.h, idw) && a.m.Stats().Refused >= 1
		})
		if a.m.IsMember(idw) || a.g.Allowed(idw) {
			t.Fatal("wrong-secret peer is a member or not blocked")
		}
		if err := wrong.connect(a); err == nil && connected(a.h, idw) {
			// The dial may complete on the wrong peer's side before a's
			// gater refuses it; it must not stay.
			waitFor(t, 5*time.Second, "the blocked peer to be cut again", func() bool { return !connected(a.h, idw) })
		}

		// A silent peer dials a member and asks it to serve: refused while
		// pending, then disconnected and blocked at the timeout.
		if err := silent.connect(a); err != nil {
			t.Fatal(err)
		}
		err := silent.infer(a)
		if !errors.Is(err, ErrBusy) {
			t.Fatalf("a pending peer's request: %v, want ErrBusy (come back after the handshake)", err)
		}
		if err := silent.snapshot(a); !errors.Is(err, ErrUnknownModel) {
			t.Fatalf("a pending peer's snapshot pull: %v, want ErrUnknownModel (no digest for outsiders)", err)
		}
		waitFor(t, 10*time.Second, "the silent peer to be disconnected", func() bool {
			return !connected(a.h, ids) && !a.g.Allowed(ids)
		})
		if st := a.m.Stats(); st.Members != 1 || st.Refused < 2 {
			t.Fatalf("stats %+v", st)
		}
		if s := a.m.AppScore(ids); s >= scoreThresholds().GraylistThreshold {
			t.Fatalf("outsider's app score %v is above the graylist threshold", s)
		}
		if s := a.m.AppScore(idb); s != 0 {
			t.Fatalf("member's app score %v", s)
		}
	})
}

func TestMembershipConfig(t *testing.T) {
	hs := mockHosts(t, 1)
	for _, n := range []int{1, MeshKeyLen - 1, MeshKeyLen + 1} {
		if _, err := NewMembership(hs[0], MembershipConfig{Key: make([]byte, n)}); !errors.Is(err, ErrMeshKey) {
			t.Fatalf("a key of %d bytes: %v, want ErrMeshKey", n, err)
		}
	}
	if _, err := NewMembership(hs[0], MembershipConfig{}); err == nil {
		t.Fatal("membership with neither key nor gater was accepted")
	}
	ids, err := ParseAllowlist([]string{"12D3KooWHgsC6jySEyxbtBE4hXte5hVijW7WrZA8ivWRsnyY6VvR"})
	if err != nil || len(ids) != 1 {
		t.Fatalf("%v %v", ids, err)
	}
	if _, err := ParseAllowlist([]string{"not-a-peer"}); err == nil {
		t.Fatal("bad peer ID accepted")
	}
}

// TestMembershipGossip: members gossip with each other; a connected peer
// that has not proven membership (pending) neither gets their messages
// nor gets its own delivered.
func TestMembershipGossip(t *testing.T) {
	mc := &MembershipConfig{Key: GenerateMeshKey(), HandshakeTimeout: 30 * time.Second} // the outsider stays pending
	pa, _ := newIdentity(t)
	pb, idb := newIdentity(t)
	pp, idp := newIdentity(t)
	a := startMember(t, false, pa, nil, mc)
	b := startMember(t, false, pb, nil, mc)
	p := startMember(t, false, pp, nil, nil)

	join := func(mh *memberHost) *Topic {
		opts := GossipOptions{}
		if mh.m != nil {
			opts.AppScore = mh.m.AppScore
			opts.PubSubOptions = mh.m.PubSubOptions()
		}
		g, err := NewGossip(context.Background(), mh.h.LibP2P(), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close() })
		tp, err := g.Join("m")
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	ta, tb, tp := join(a), join(b), join(p)
	if err := b.connect(a); err != nil {
		t.Fatal(err)
	}
	if err := p.connect(a); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "b's membership", func() bool { return a.m.IsMember(idb) })
	waitFor(t, 10*time.Second, "topic peers", func() bool { return len(ta.Peers()) == 2 && len(tp.Peers()) >= 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	publish := func(tp *Topic, seq uint64) {
		if err := tp.PublishLoad(ctx, &Load{Epoch: 1, Seq: seq, At: time.Now(), Slots: 1}); err != nil {
			t.Error(err)
		}
	}
	// a hears b, never p, though p publishes first and as often.
	fromB := 0
	for seq := uint64(1); fromB < 3; seq++ {
		publish(tp, seq)
		publish(tb, seq)
		mctx, mcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		for {
			msg, err := ta.Next(mctx)
			if err != nil {
				break
			}
			switch msg.From {
			case idp:
				t.Fatal("a delivered a pending outsider's message")
			case idb:
				fromB++
			}
		}
		mcancel()
		if ctx.Err() != nil {
			t.Fatalf("a heard %d messages from b", fromB)
		}
	}
	// b hears a; p, connected to a all along, does not.
	for seq := uint64(1); ; seq++ {
		publish(ta, seq)
		mctx, mcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		msg, err := tb.Next(mctx)
		mcancel()
		if err == nil && msg.From == a.h.ID() {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("b never heard a")
		}
	}
	mctx, mcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer mcancel()
	if msg, err := tp.Next(mctx); err == nil {
		t.Fatalf("the outsider received %+v", msg)
	}
}
