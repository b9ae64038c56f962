/*
Copyright The provfleet Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path"
	"syscall"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/provfleet/provfleet/bench/internal/kubeclient"
)

type options struct {
	kubeconfig string
	prefix     string
	dir        string
	count      int
	remove     bool
	qps        float64
	burst      int
}

func main() {
	var o options
	fs := flag.NewFlagSet("limit", flag.ExitOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig.")
	fs.StringVar(&o.prefix, "prefix", "limit", "PersistentVolumes are named <prefix>-<n>.")
	fs.StringVar(&o.dir, "dir", "/tmp/limit", "hostPath directory the volumes name (never touched).")
	fs.IntVar(&o.count, "count", 0, "How many PersistentVolumes.")
	fs.BoolVar(&o.remove, "delete", false, "Delete the PersistentVolumes instead of creating them.")
	fs.Float64Var(&o.qps, "kube-api-qps", 50, "API requests a second.")
	fs.IntVar(&o.burst, "kube-api-burst", 100, "API request burst.")
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if o.count < 1 {
		return errors.New("--count must be at least 1")
	}
	config, err := kubeclient.Config(o.kubeconfig, o.qps, o.burst, "limit")
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("cannot build the client: %w", err)
	}
	volumes := client.CoreV1().PersistentVolumes()
	// As many requests in flight as the burst lets through: the client's rate
	// limiter, not the concurrency, is the bound.
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(o.burst)
	for i := range o.count {
		name := fmt.Sprintf("%s-%d", o.prefix, i)
		g.Go(func() error {
			if o.remove {
				if err := volumes.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("cannot delete PersistentVolume %s: %w", name, err)
				}
				return nil
			}
			if _, err := volumes.Create(ctx, volume(name, path.Join(o.dir, name)), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("cannot create PersistentVolume %s: %w", name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// volume is what a directory provisioner would save, without a claim to
// bind, so no controller acts on it.
func volume(name, dir string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir},
			},
		},
	}
}
