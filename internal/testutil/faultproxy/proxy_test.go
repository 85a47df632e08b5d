package faultproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestForwardsBytesAsTheyAre sends a megabyte of random bytes both ways at
// once, then half-closes: the echo comes back whole and in order, the end
// of the stream is passed on, and Stats counts both directions.
func TestForwardsBytesAsTheyAre(t *testing.T) {
	echo := startEcho(t)
	p := startProxy(t, echo.addr)

	payload := make([]byte, 1<<20)
	rand.Read(payload)
	conn := dial(t, p)
	var wrote sync.WaitGroup
	wrote.Go(func() {
		if _, err := conn.Write(payload); err != nil {
			t.Errorf("writing: %v", err)
		}
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Errorf("half-closing: %v", err)
		}
	})
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(conn) // ends at the echo server's FIN, passed on
	wrote.Wait()
	if err != nil {
		t.Fatalf("reading the echo: %v", err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("echo differs: got %d bytes, want the %d sent", len(got), len(payload))
	}
	roundTrip(t, dial(t, p), "second connection", 10*time.Second)

	want := int64(2*len(payload) + 2*len("second connection"))
	testutil.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		if conns, n := p.Stats(); conns != 2 || n != want {
			return fmt.Errorf("stats: %d connections, %d bytes; want 2, %d", conns, n, want)
		}
		return nil
	})
}

// TestBlackholeHoldsBytesUntilHealed cuts an open connection and a new one:
// nothing reaches the target or comes back, the new one is not even dialled,
// and once the blackhole ends what was sent meanwhile arrives.
func TestBlackholeHoldsBytesUntilHealed(t *testing.T) {
	echo := startEcho(t)
	p := startProxy(t, echo.addr)
	open := dial(t, p)
	roundTrip(t, open, "before", 10*time.Second)
	// The echo's bytes are counted once written to the client, which may
	// have read them a moment earlier: wait for both ways to be counted.
	before := int64(2 * len("before"))
	testutil.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		if _, n := p.Stats(); n != before {
			return fmt.Errorf("%d bytes counted, want %d", n, before)
		}
		return nil
	})

	p.Blackhole(true)
	p.Blackhole(true) // twice is once
	write(t, open, "held on an open connection")
	late := dial(t, p) // accepted: a partition does not refuse connections
	write(t, late, "held on a new connection")
	for _, conn := range []net.Conn{open, late} {
		conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if n, err := conn.Read(make([]byte, 64)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("reading through the blackhole: %d bytes, %v; want a timeout", n, err)
		}
	}
	if _, n := p.Stats(); n != before {
		t.Errorf("%d bytes forwarded during the blackhole, want none", n-before)
	}
	if n := echo.accepted.Load(); n != 1 {
		t.Errorf("the target accepted %d connections during the blackhole, want 1 (the one from before)", n)
	}

	p.Blackhole(false)
	read(t, open, "held on an open connection", 10*time.Second)
	read(t, late, "held on a new connection", 10*time.Second)
	roundTrip(t, dial(t, p), "after", 10*time.Second)
}

// TestBlackholeTimesOutHTTPSUntilHealed sends HTTPS requests through the
// proxy, so the client verifies the server's own certificate: one sent
// during a blackhole times out, and one sent after it ends succeeds.
func TestBlackholeTimesOutHTTPSUntilHealed(t *testing.T) {
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(server.Close)
	p := startProxy(t, server.Listener.Addr().String())
	client := server.Client()
	url := "https://" + p.Addr()

	if err := get(client, url, 10*time.Second); err != nil {
		t.Fatalf("before the blackhole: %v", err)
	}
	p.Blackhole(true)
	if err := get(client, url, time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("during the blackhole: got %v, want a timeout", err)
	}
	p.Blackhole(false)
	if err := get(client, url, 10*time.Second); err != nil {
		t.Fatalf("after the blackhole: %v", err)
	}
}

// TestDelayHoldsEveryChunkInOrder checks that a delay applies to both
// directions of a round trip, and that lowering it mid-stream does not let
// later bytes overtake earlier ones.
func TestDelayHoldsEveryChunkInOrder(t *testing.T) {
	echo := startEcho(t)
	p := startProxy(t, echo.addr)
	conn := dial(t, p)

	const delay = 200 * time.Millisecond
	p.SetDelay(delay)
	started := time.Now()
	roundTrip(t, conn, "ping", 10*time.Second)
	if took := time.Since(started); took < 2*delay {
		t.Errorf("round trip took %s with a delay of %s each way, want at least %s", took, delay, 2*delay)
	}

	// The first half is read while the delay is a second; the second half,
	// written once it is zero, must still come back after it.
	p.SetDelay(time.Second)
	var sent bytes.Buffer
	started = time.Now()
	for i := range 100 {
		write(t, conn, fmt.Sprintf("slow %03d;", i))
		fmt.Fprintf(&sent, "slow %03d;", i)
	}
	time.Sleep(200 * time.Millisecond) // the proxy reads them meanwhile
	p.SetDelay(0)
	for i := range 100 {
		write(t, conn, fmt.Sprintf("fast %03d;", i))
		fmt.Fprintf(&sent, "fast %03d;", i)
	}
	read(t, conn, sent.String(), 30*time.Second)
	if took := time.Since(started); took < time.Second {
		t.Errorf("the stream came back after %s, want at least the 1s delay of its first half", took)
	}
}

// TestResetAbortsOpenConnections resets a connection with a read in
// flight: the read fails with "connection reset", the target's side is
// reset too, and a new connection works.
func TestResetAbortsOpenConnections(t *testing.T) {
	echo := startEcho(t)
	p := startProxy(t, echo.addr)
	conn := dial(t, p)
	roundTrip(t, conn, "before", 10*time.Second)

	readErr := make(chan error, 1)
	go func() {
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err := conn.Read(make([]byte, 64))
		readErr <- err
	}()
	time.Sleep(100 * time.Millisecond) // the read is in flight
	p.Reset()
	if err := <-readErr; !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read in flight during Reset: got %v, want connection reset", err)
	}
	select {
	case err := <-echo.ended:
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("the target's side ended with %v, want connection reset", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the target's side of the connection is still open after Reset")
	}
	roundTrip(t, dial(t, p), "after", 10*time.Second)
	if conns, _ := p.Stats(); conns != 2 {
		t.Errorf("%d connections accepted, want 2", conns)
	}
}

// TestCloseEndsEverything closes the proxy with connections in every state:
// forwarding, holding delayed bytes, and waiting for a blackhole to end
// before dialling. Every client sees its connection end, the port is
// closed, and no goroutine of the proxy is left.
func TestCloseEndsEverything(t *testing.T) {
	echo := startEcho(t)
	p, err := Start(echo.addr)
	if err != nil {
		t.Fatal(err)
	}
	active := dial(t, p)
	roundTrip(t, active, "active", 10*time.Second)
	p.SetDelay(time.Hour)
	write(t, active, "delayed")
	p.Blackhole(true)
	waiting := dial(t, p)
	write(t, waiting, "waiting")
	testutil.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		if conns, _ := p.Stats(); conns != 2 {
			return fmt.Errorf("%d connections accepted, want 2", conns)
		}
		return nil
	})

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("closing twice: %v", err)
	}
	for _, conn := range []net.Conn{active, waiting} {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := conn.Read(make([]byte, 64)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("reading after Close: %d bytes, %v; want the connection closed", n, err)
		}
	}
	if conn, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		conn.Close()
		t.Error("the proxy still accepts connections after Close")
	}
	if stacks := proxyGoroutines(); len(stacks) > 0 {
		t.Errorf("goroutines of the proxy left after Close:\n%s", strings.Join(stacks, "\n\n"))
	}
}

// echoServer writes back what it reads on every connection, until the test
// ends.
type echoServer struct {
	addr     string
	accepted atomic.Int64
	ended    chan error // how each connection ended
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{addr: listener.Addr().String(), ended: make(chan error, 100)}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			e.accepted.Add(1)
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Go(func() {
				_, err := io.Copy(conn, conn)
				if err == nil {
					err = conn.(*net.TCPConn).CloseWrite() // pass the client's half-close back
				}
				e.ended <- err
			})
		}
	})
	t.Cleanup(func() {
		listener.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return e
}

func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func write(t *testing.T, conn net.Conn, s string) {
	t.Helper()
	conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, s); err != nil {
		t.Fatalf("writing %q: %v", s, err)
	}
}

func read(t *testing.T, conn net.Conn, want string, timeout time.Duration) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(timeout))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatalf("reading %q: got %q, %v", want, got, err)
	}
	if string(got) != want {
		t.Fatalf("read %q, want %q", got, want)
	}
}

func roundTrip(t *testing.T, conn net.Conn, s string, timeout time.Duration) {
	t.Helper()
	write(t, conn, s)
	read(t, conn, s, timeout)
}

func get(client *http.Client, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return fmt.Errorf("got %s %q, want 200 ok", resp.Status, body)
	}
	return nil
}

// proxyGoroutines returns the stacks of running goroutines that are in a
// method of Proxy.
func proxyGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "faultproxy.(*Proxy)") {
			found = append(found, g)
		}
	}
	return found
}
