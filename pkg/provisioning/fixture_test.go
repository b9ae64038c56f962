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

package provisioning

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/provfleet/provfleet/internal/leaderelection/leasetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testProvisioner = "provfleet.io/test"

// testConfig is a fast configuration without leader election.
func testConfig(name string) Config {
	cfg := DefaultConfig(name)
	cfg.Workers = 2
	cfg.Retry.InitialDelay = time.Millisecond
	cfg.Retry.MaxDelay = 10 * time.Millisecond
	cfg.VolumeSave.Interval = time.Millisecond
	cfg.LeaderElection.Enabled = false
	return cfg
}

// fakeBackend is a Provisioner that keeps its volumes in memory.
type fakeBackend struct {
	mu          sync.Mutex
	volumes     map[string]bool // backend volumes that exist
	provisioned map[string]int  // successful Provision calls per PV name
	deleted     []string
	calls       int
	options     []ProvisionOptions

	// provision, when set, decides the outcome of Provision.
	provision func(ctx context.Context, call int, options ProvisionOptions) (ProvisioningState, error)
	deleteErr error
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{volumes: map[string]bool{}, provisioned: map[string]int{}}
}

func (b *fakeBackend) Provision(ctx context.Context, options ProvisionOptions) (*corev1.PersistentVolume, ProvisioningState, error) {
	b.mu.Lock()
	b.calls++
	call := b.calls
	b.options = append(b.options, options)
	b.mu.Unlock()
	state := ProvisioningFinished
	if b.provision != nil {
		var err error
		if state, err = b.provision(ctx, call, options); err != nil {
			return nil, state, err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.volumes[options.PVName] = true
	b.provisioned[options.PVName]++
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: options.PVName},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			AccessModes:                   options.PVC.Spec.AccessModes,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + options.PVName},
			},
		},
	}, state, nil
}

func (b *fakeBackend) Delete(ctx context.Context, volume *corev1.PersistentVolume) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.deleteErr != nil {
		return b.deleteErr
	}
	delete(b.volumes, volume.Name)
	b.deleted = append(b.deleted, volume.Name)
	return nil
}

func (b *fakeBackend) snapshot() (calls int, volumes []string, deleted []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name := range b.volumes {
		volumes = append(volumes, name)
	}
	return b.calls, volumes, append([]string(nil), b.deleted...)
}

func (b *fakeBackend) provisionCount(name string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.provisioned[name]
}

// testRecorder keeps the reasons and messages of the events it records.
type testRecorder struct {
	mu       sync.Mutex
	reasons  []string
	messages []string
}

func (r *testRecorder) Event(_ runtime.Object, _, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = append(r.reasons, reason)
	r.messages = append(r.messages, message)
}

func (r *testRecorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *testRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.Eventf(obj, eventtype, reason, messageFmt, args...)
}

func (r *testRecorder) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reasons...)
}

// messagesOf returns the messages of the events of reason.
func (r *testRecorder) messagesOf(reason string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var messages []string
	for i, got := range r.reasons {
		if got == reason {
			messages = append(messages, r.messages[i])
		}
	}
	return messages
}

// fixture is a fake clientset with one set of shared informers.
type fixture struct {
	t         *testing.T
	client    *fake.Clientset
	factory   informers.SharedInformerFactory
	informers SharedInformers
	registry  *prometheus.Registry
	metrics   *Metrics
}

func newFixture(t *testing.T, objects ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objects...)
	leasetest.EnforceVersions(client)
	honourVolumeDeletion(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{
		t:       t,
		client:  client,
		factory: factory,
		informers: SharedInformers{
			Claims:  factory.Core().V1().PersistentVolumeClaims().Informer(),
			Volumes: factory.Core().V1().PersistentVolumes().Informer(),
			Classes: factory.Storage().V1().StorageClasses().Informer(),
			Nodes:   factory.Core().V1().Nodes().Informer(),
			Leases:  factory.Coordination().V1().Leases().Informer(),
		},
		registry: reg,
		metrics:  m,
	}
}

// start runs the informers until the test ends.
func (f *fixture) start() {
	ctx, cancel := context.WithCancel(context.Background())
	f.factory.Start(ctx.Done())
	f.factory.WaitForCacheSync(ctx.Done())
	f.t.Cleanup(func() {
		cancel()
		f.factory.Shutdown()
	})
}

// fill puts objects into the informer stores without running the informers,
// for tests that call the controller's sync functions directly.
func (f *fixture) fill(objects ...runtime.Object) {
	for _, obj := range objects {
		var err error
		switch obj.(type) {
		case *corev1.PersistentVolumeClaim:
			err = f.informers.Claims.GetStore().Add(obj)
		case *corev1.PersistentVolume:
			err = f.informers.Volumes.GetStore().Add(obj)
		case *storagev1.StorageClass:
			err = f.informers.Classes.GetStore().Add(obj)
		case *corev1.Node:
			err = f.informers.Nodes.GetStore().Add(obj)
		}
		if err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) newController(cfg Config, backend Provisioner, recorder *testRecorder) *Controller {
	f.t.Helper()
	c, err := New(cfg, Dependencies{
		Client:        f.client,
		Informers:     f.informers,
		EventRecorder: recorder,
		Metrics:       f.metrics,
		Provisioner:   backend,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// startController runs c until the returned stop is called or the test ends; stop
// returns once Run returned.
func startController(t *testing.T, c *Controller) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func newClass(name, provisioner string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner}
}

func newClaim(name, class, provisioner string) *corev1.PersistentVolumeClaim {
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: types.UID("uid-" + name), ResourceVersion: "1",
			Annotations: map[string]string{},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			},
		},
	}
	if provisioner != "" {
		claim.Annotations[AnnStorageProvisioner] = provisioner
	}
	return claim
}

func newVolume(name, provisioner string, phase corev1.PersistentVolumePhase, policy corev1.PersistentVolumeReclaimPolicy) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, ResourceVersion: "1",
			Annotations: map[string]string{AnnDynamicallyProvisioned: provisioner},
		},
		Spec:   corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: policy, StorageClassName: "fast"},
		Status: corev1.PersistentVolumeStatus{Phase: phase},
	}
}

func (f *fixture) getClaim(name string) *corev1.PersistentVolumeClaim {
	f.t.Helper()
	claim, err := f.client.CoreV1().PersistentVolumeClaims("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return claim
}

func (f *fixture) volumeExists(name string) bool {
	_, err := f.client.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
	return err == nil
}

var errBackend = errors.New("backend failure")
