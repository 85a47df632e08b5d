package dashboard

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
)

// shutdownTimeout bounds how long requests in flight may take once the
// manager stops.
const shutdownTimeout = 5 * time.Second

// Server serves Handler on Addr for as long as the manager runs. It is a
// manager Runnable that does not need leader election: every replica
// serves the dashboard from its own cache, so a standby answers too.
type Server struct {
	Addr    string
	Handler http.Handler
	Log     logr.Logger
	// Authenticated says Handler lets only authorized users in (Access);
	// it is logged.
	Authenticated bool
	// TLS, when set, serves HTTPS only, with its certificate: off a
	// loopback IP, where requests carry bearer tokens over the network.
	TLS *tls.Config
}

// Start listens on Addr and serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("serving the dashboard: %w", err)
	}
	srv := &http.Server{
		Handler:           s.Handler,
		ReadHeaderTimeout: 10 * time.Second,
		// Requests end with the manager.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	if s.TLS != nil {
		ln = tls.NewListener(ln, s.TLS)
	}
	s.Log.Info("Serving the dashboard", "addr", ln.Addr().String(), "bearerTokenRequired", s.Authenticated, "tls", s.TLS != nil)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving the dashboard: %w", err)
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(stop); err != nil {
		return fmt.Errorf("stopping the dashboard: %w", err)
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: the
// dashboard only reads, so every replica serves it.
func (s *Server) NeedLeaderElection() bool { return false }
