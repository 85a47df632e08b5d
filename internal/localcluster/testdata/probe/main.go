// Command probe runs on the real node of a local cluster in its tests. It
// serves HTTP on :8080 and becomes ready once it has reached the API server
// as in-cluster clients do: at the kubernetes Service, with the pod's service
// account token, trusting the cluster's CA. / then reports what it learnt.
package main

import (
	"context"
	"encoding/json"
	"log"
	"net/http"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// report is what the probe learnt from the API server.
type report struct {
	Host          string `json:"host"`
	ServerVersion string `json:"serverVersion"`
	User          string `json:"user"`
}

func main() {
	var learnt atomic.Pointer[report]
	go func() {
		for {
			r, err := ask()
			if err == nil {
				learnt.Store(r)
				return
			}
			log.Printf("asking the API server: %v", err)
			time.Sleep(time.Second)
		}
	}()
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	http.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if learnt.Load() == nil {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		r := learnt.Load()
		if r == nil {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(r)
	})
	log.Fatal(http.ListenAndServe(":8080", nil))
}

// ask reads the server's version and who the API server takes the pod for.
func ask() (*report, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	version, err := client.Discovery().ServerVersion()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return &report{Host: cfg.Host, ServerVersion: version.GitVersion, User: review.Status.UserInfo.Username}, nil
}
