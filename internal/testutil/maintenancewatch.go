package testutil

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// MaintenanceWatch follows every change of the nodes a label selector
// picks, from before they exist: each node's states in order, and the most
// nodes ever in maintenance at once (watch events come in the API server's
// order, so the count at each event is exact).
type MaintenanceWatch struct {
	mu         sync.Mutex
	states     map[string][]string
	in         map[string]bool
	mostAtOnce int
}

// WatchMaintenance starts the watch; it ends with the test. onEnter, if
// set, runs in its own goroutine whenever a node enters in-maintenance (a
// simulated reboot, say).
func WatchMaintenance(t testing.TB, cs kubernetes.Interface, selector string, onEnter func(ctx context.Context, node string)) *MaintenanceWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	w, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	m := &MaintenanceWatch{states: map[string][]string{}, in: map[string]bool{}}
	go func() {
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			state := n.Labels[pitstopv1alpha1.LabelState]
			m.mu.Lock()
			seq := m.states[n.Name]
			if state != "" && (len(seq) == 0 || seq[len(seq)-1] != state) {
				m.states[n.Name] = append(seq, state)
				if state == string(pitstopv1alpha1.StateInMaintenance) && onEnter != nil {
					go onEnter(ctx, n.Name)
				}
			}
			m.in[n.Name] = state == string(pitstopv1alpha1.StateInMaintenance)
			count := 0
			for _, in := range m.in {
				if in {
					count++
				}
			}
			m.mostAtOnce = max(m.mostAtOnce, count)
			m.mu.Unlock()
		}
	}()
	return m
}

// MostAtOnce is the most nodes seen in maintenance together.
func (m *MaintenanceWatch) MostAtOnce() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mostAtOnce
}

// Through counts the nodes that have been in maintenance and left it.
func (m *MaintenanceWatch) Through() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	done := 0
	for _, seq := range m.states {
		for i := 0; i+1 < len(seq); i++ {
			if seq[i] == string(pitstopv1alpha1.StateInMaintenance) {
				done++
				break
			}
		}
	}
	return done
}

// States returns each node's states in the order seen.
func (m *MaintenanceWatch) States() map[string][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]string, len(m.states))
	for n, seq := range m.states {
		out[n] = append([]string(nil), seq...)
	}
	return out
}
