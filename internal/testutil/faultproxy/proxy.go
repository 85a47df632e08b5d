package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// chunkSize is the most one read takes from a connection.
	chunkSize = 32 << 10
	// queuedChunks is how many chunks a direction holds (delayed or
	// blackholed) before it stops reading, and TCP flow control pushes back
	// on the sender as a slow network would.
	queuedChunks = 64
)

// Proxy forwards every TCP connection it accepts on 127.0.0.1 to one target
// address, and injects faults into all of them on demand. Its methods are
// safe for concurrent use.
type Proxy struct {
	target   string
	listener net.Listener
	wg       sync.WaitGroup // the accept loop and every connection's goroutines

	accepted  atomic.Int64
	forwarded atomic.Int64
	delay     atomic.Int64 // a time.Duration

	mu     sync.Mutex
	links  map[*link]struct{}
	healed chan struct{} // non-nil while blackholed; closed when the blackhole ends
	closed bool
}

// link is one client connection and the connection to the target made for
// it.
type link struct {
	client   *net.TCPConn
	upstream *net.TCPConn       // nil until dialled; guarded by Proxy.mu
	ctx      context.Context    // done once the link is torn down
	cancel   context.CancelFunc // tears the link down
}

// chunk is bytes read from one side, due on the other side at due.
type chunk struct {
	data []byte
	due  time.Time
}

// Start listens on 127.0.0.1 on a free port and forwards every connection
// to target (host:port). The connection to target is dialled when a client
// connects, not before.
func Start(target string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("proxy target %q: %w", target, err)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for a proxy to %s: %w", target, err)
	}
	p := &Proxy{target: target, listener: listener, links: map[*link]struct{}{}}
	p.wg.Go(p.serve)
	return p, nil
}

// Addr is the host:port the proxy listens on.
func (p *Proxy) Addr() string { return p.listener.Addr().String() }

// Blackhole cuts every connection, open or new, as a network partition
// would, or heals the cut. While on, new connections are accepted and then
// hang (the target is dialled only once it ends), and nothing reaches the
// other side in either direction: no byte, no end of stream (FIN) and no
// reset. Bytes read meanwhile are held and delivered, in order, once it
// ends, as TCP delivers them after a partition heals; a client that gave up
// meanwhile has closed its connection, and that close is passed on too.
//
// The kernel still acknowledges bytes and TCP keepalives between a client
// and the proxy: a client notices the partition only through its own
// timeouts or application-level pings (HTTP/2 PING, as client-go sends).
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.healed == nil:
		p.healed = make(chan struct{})
	case !on && p.healed != nil:
		close(p.healed)
		p.healed = nil
	}
}

// SetDelay holds every chunk read from now on, in both directions, for d
// before forwarding it (0: none). Chunks of one direction of a connection
// leave in the order they came, whatever the delay was when each was read.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(max(d, 0))) }

// Reset closes every open connection at once with a TCP RST, on the
// client's side and the target's, as a load balancer or a restarted peer
// does: a read in flight fails with "connection reset by peer". Bytes held
// by a delay or a blackhole are dropped. Connections accepted afterwards
// are forwarded as usual.
func (p *Proxy) Reset() {
	for _, l := range p.openLinks() {
		p.teardown(l, true)
	}
}

// Stats returns how many connections the proxy has accepted and how many
// bytes it has forwarded, both directions together.
func (p *Proxy) Stats() (conns int, bytes int64) {
	return int(p.accepted.Load()), p.forwarded.Load()
}

// Close stops listening, closes every connection and returns once every
// goroutine of the proxy has ended. It is safe to call more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.listener.Close()
	for _, l := range p.openLinks() {
		p.teardown(l, false)
	}
	p.wg.Wait()
	return err
}

// serve accepts connections until the listener is closed.
func (p *Proxy) serve() {
	for {
		conn, err := p.listener.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of file descriptors, or the like: try again shortly rather
			// than spin.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.accepted.Add(1)
		if l := p.register(conn.(*net.TCPConn)); l != nil {
			p.wg.Go(func() { p.carry(l) })
		}
	}
}

// register records a new client connection, or closes it if the proxy is
// closed already.
func (p *Proxy) register(conn *net.TCPConn) *link {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		conn.Close()
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &link{client: conn, ctx: ctx, cancel: cancel}
	p.links[l] = struct{}{}
	return l
}

// openLinks returns the links open now.
func (p *Proxy) openLinks() []*link {
	p.mu.Lock()
	defer p.mu.Unlock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	return links
}

// carry dials the target for a client connection, once no blackhole is in
// the way, and forwards both directions until both have ended.
func (p *Proxy) carry(l *link) {
	defer p.forget(l)
	if !p.awaitOpen(l.ctx) {
		return
	}
	var dialer net.Dialer
	conn, err := dialer.DialContext(l.ctx, "tcp", p.target)
	if err != nil {
		return // the client sees its connection closed, as with a dead target
	}
	upstream := conn.(*net.TCPConn)
	if !p.attach(l, upstream) {
		return
	}
	var toTarget sync.WaitGroup
	toTarget.Go(func() { p.pipe(l, l.client, upstream) })
	p.pipe(l, upstream, l.client)
	toTarget.Wait()
}

// attach records the target's connection on its link, unless the link was
// torn down while it was dialled: then it closes the connection.
func (p *Proxy) attach(l *link, upstream *net.TCPConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.ctx.Err() != nil {
		upstream.Close()
		return false
	}
	l.upstream = upstream
	return true
}

// forget closes both connections of a link that has ended and drops it.
func (p *Proxy) forget(l *link) {
	p.teardown(l, false)
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// teardown ends a link: it stops its goroutines and closes both
// connections, with a TCP RST if rst is set. It is cancelled before the
// target's connection is read, so attach either sees the link gone or has
// recorded the connection for teardown to close.
func (p *Proxy) teardown(l *link, rst bool) {
	l.cancel()
	p.mu.Lock()
	upstream := l.upstream
	p.mu.Unlock()
	for _, conn := range []*net.TCPConn{l.client, upstream} {
		if conn == nil {
			continue
		}
		if rst {
			// SO_LINGER 0 makes close send RST instead of FIN.
			_ = conn.SetLinger(0)
		}
		_ = conn.Close()
	}
}

// pipe forwards src to dst until src ends. A reader queues what src sends,
// each chunk stamped with the time it is due; this goroutine writes the
// queue to dst in order, waiting for each chunk's time and for any
// blackhole to end. A clean end of src (FIN) becomes a half-close of dst,
// so the other direction goes on; any other end tears the link down.
func (p *Proxy) pipe(l *link, src, dst *net.TCPConn) {
	queue := make(chan chunk, queuedChunks)
	var readErr error
	var reader sync.WaitGroup
	reader.Go(func() {
		defer close(queue)
		buf := make([]byte, chunkSize)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				c := chunk{data: bytes.Clone(buf[:n]), due: time.Now().Add(time.Duration(p.delay.Load()))}
				select {
				case queue <- c:
				case <-l.ctx.Done():
					return
				}
			}
			if err != nil {
				readErr = err
				return
			}
		}
	})
	defer reader.Wait()

	for c := range queue {
		if !sleepUntil(l.ctx, c.due) || !p.awaitOpen(l.ctx) {
			p.teardown(l, false)
			return
		}
		n, err := dst.Write(c.data)
		p.forwarded.Add(int64(n))
		if err != nil {
			p.teardown(l, false)
			return
		}
	}
	// The queue is closed: the reader has ended, and readErr is set. The end
	// of the stream crosses a blackhole no sooner than the bytes before it.
	if !p.awaitOpen(l.ctx) {
		return
	}
	if errors.Is(readErr, io.EOF) {
		_ = dst.CloseWrite()
		return
	}
	p.teardown(l, false)
}

// awaitOpen waits until no blackhole is on. It returns false if ctx ends
// first.
func (p *Proxy) awaitOpen(ctx context.Context) bool {
	for {
		p.mu.Lock()
		healed := p.healed
		p.mu.Unlock()
		if healed == nil {
			return ctx.Err() == nil
		}
		select {
		case <-healed:
		case <-ctx.Done():
			return false
		}
	}
}

// sleepUntil waits until t. It returns false if ctx ends first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	wait := time.Until(t)
	if wait <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
