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

package migrate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// Source names the provisioner a plan migrates from.
type Source string

// The provisioners a plan migrates from.
const (
	FromNFSSubdir Source = "nfs-subdir"
	FromLocalPath Source = "local-path"
)

// Sources lists every Source, as the command line offers them.
var Sources = []Source{FromNFSSubdir, FromLocalPath}

// images are the image names, without registry and tag, by which a
// Deployment of each Source is found.
var images = map[Source]string{
	FromNFSSubdir: "nfs-subdir-external-provisioner",
	FromLocalPath: "local-path-provisioner",
}

// Options say what to plan.
type Options struct {
	// From is the old provisioner.
	From Source
	// Deployment is the old provisioner's Deployment; with no Name, the one
	// Deployment of the cluster whose container runs From's image.
	Deployment types.NamespacedName
	// Name is the ProvisionerConfig's; empty, the Deployment's name.
	Name string
	// Version is the old provisioner's release, such as v4.0.2; empty, the
	// tag of its image.
	Version string
}

// Plan is what a migration does: the ProvisionerConfig that takes the old
// provisioner's place and the fate of each of its volumes, or why it
// cannot.
type Plan struct {
	From       Source
	Deployment types.NamespacedName
	// Image is the old provisioner's image, Version its release.
	Image   string
	Version string
	// OldName is the provisioner name the old provisioner answered to.
	OldName string
	// Classes are the StorageClasses of OldName, kept as they are.
	Classes []string
	// Config is the ProvisionerConfig to create; nil when the old install
	// cannot be read into one (a Refusal says why).
	Config *v1alpha1.ProvisionerConfig
	// Volumes are the old provisioner's PersistentVolumes, by name.
	Volumes []Volume
	// Refusals are what provfleet cannot take over as it is; the plan is
	// not applied while there is one.
	Refusals []Refusal
	// Running says how the old provisioner still runs; empty once it is
	// gone.
	Running []string
	// Notes are what the administrator checks by hand.
	Notes []string
}

// Volume is an old PersistentVolume and its fate.
type Volume struct {
	PV *corev1.PersistentVolume
	// Fate is what happens to its directory when it is released.
	Fate string
	// Record holds the annotations Apply adds to it; none when all is
	// recorded already.
	Record map[string]string
}

// Refusal names an object whose behaviour provfleet cannot keep, and why.
type Refusal struct {
	// Object is its kind and name, such as "StorageClass fast".
	Object string
	Reason string
}

func (p *Plan) refuse(object, format string, args ...any) {
	p.Refusals = append(p.Refusals, Refusal{Object: object, Reason: fmt.Sprintf(format, args...)})
}

// Applicable returns nil when Apply may carry the plan out, else why not.
func (p *Plan) Applicable() error {
	var reasons []string
	if len(p.Refusals) > 0 {
		reasons = append(reasons, fmt.Sprintf("%d refusals", len(p.Refusals)))
	}
	if len(p.Running) > 0 {
		reasons = append(reasons, fmt.Sprintf("Deployment %s still runs (%s): scale it to zero first",
			p.Deployment, strings.Join(p.Running, "; ")))
	}
	if p.Config == nil && len(reasons) == 0 {
		reasons = append(reasons, "no ProvisionerConfig planned")
	}
	if len(reasons) > 0 {
		return fmt.Errorf("cannot apply the plan: %s", strings.Join(reasons, ", "))
	}
	return nil
}

// install is the old provisioner as the cluster holds it.
type install struct {
	deployment *appsv1.Deployment
	container  *corev1.Container
	classes    map[string]*storagev1.StorageClass
	volumes    []*corev1.PersistentVolume
}

// classesOf returns the StorageClasses of provisioner name, by name.
func (in *install) classesOf(name string) []*storagev1.StorageClass {
	var classes []*storagev1.StorageClass
	for _, class := range in.classes {
		if class.Provisioner == name {
			classes = append(classes, class)
		}
	}
	slices.SortFunc(classes, func(a, b *storagev1.StorageClass) int { return strings.Compare(a.Name, b.Name) })
	return classes
}

// volumesOf returns the PersistentVolumes provisioner name made, by name.
func (in *install) volumesOf(name string) []*corev1.PersistentVolume {
	var volumes []*corev1.PersistentVolume
	for _, pv := range in.volumes {
		if pv.Annotations[provisioning.AnnDynamicallyProvisioned] == name {
			volumes = append(volumes, pv)
		}
	}
	slices.SortFunc(volumes, func(a, b *corev1.PersistentVolume) int { return strings.Compare(a.Name, b.Name) })
	return volumes
}

// Make reads the cluster through client and plans the migration o asks
// for. It changes nothing. An error means the cluster could not be read
// or holds no old provisioner to plan for; what provfleet cannot take over
// is a Refusal in the plan.
func Make(ctx context.Context, client kubernetes.Interface, o Options) (*Plan, error) {
	image, ok := images[o.From]
	if !ok {
		return nil, fmt.Errorf("cannot migrate from %q: want one of %v", o.From, Sources)
	}
	in, err := read(ctx, client, o.Deployment, image)
	if err != nil {
		return nil, err
	}
	p := &Plan{
		From:       o.From,
		Deployment: types.NamespacedName{Namespace: in.deployment.Namespace, Name: in.deployment.Name},
		Image:      in.container.Image,
		Version:    o.Version,
	}
	if p.Version == "" {
		p.Version = imageTag(p.Image)
	}
	if p.Running, err = stillRunning(ctx, client, in.deployment); err != nil {
		return nil, err
	}
	name := o.Name
	if name == "" {
		name = in.deployment.Name
	}
	switch o.From {
	case FromNFSSubdir:
		p.planNFSSubdir(in, name)
	case FromLocalPath:
		if err := p.planLocalPath(ctx, client, in, name); err != nil {
			return nil, err
		}
	}
	for _, class := range in.classesOf(p.OldName) {
		p.Classes = append(p.Classes, class.Name)
	}
	return p, nil
}

// read finds the old provisioner's Deployment and reads the classes and
// volumes.
func read(ctx context.Context, client kubernetes.Interface, deployment types.NamespacedName, image string) (*install, error) {
	d, container, err := findDeployment(ctx, client, deployment, image)
	if err != nil {
		return nil, err
	}
	classes, err := client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot list StorageClasses: %w", err)
	}
	volumes, err := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot list PersistentVolumes: %w", err)
	}
	in := &install{deployment: d, container: container, classes: map[string]*storagev1.StorageClass{}}
	for i := range classes.Items {
		in.classes[classes.Items[i].Name] = &classes.Items[i]
	}
	for i := range volumes.Items {
		in.volumes = append(in.volumes, &volumes.Items[i])
	}
	return in, nil
}

// newConfig returns the ProvisionerConfig name that answers to oldName
// with backend, or refuses a name that cannot name a provisioner.
func (p *Plan) newConfig(name, oldName string, backend v1alpha1.BackendSpec) {
	provisionerName := "provfleet.io/" + name
	if errs := validation.IsQualifiedName(provisionerName); len(errs) > 0 {
		p.refuse("ProvisionerConfig "+name, "its provisioner name %s is no StorageClass provisioner name (%s): choose a shorter name with --name",
			provisionerName, strings.Join(errs, "; "))
		return
	}
	p.Config = &v1alpha1.ProvisionerConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "ProvisionerConfig"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ProvisionerConfigSpec{
			ProvisionerName:            v1alpha1.ProvisionerName(provisionerName),
			AdditionalProvisionerNames: []v1alpha1.ProvisionerName{v1alpha1.ProvisionerName(oldName)},
			Backend:                    backend,
		},
	}
}

// record returns the annotations of want that pv lacks; a value pv has
// already, by hand or from an earlier run, is never overwritten.
func record(pv *corev1.PersistentVolume, want map[string]string) map[string]string {
	missing := map[string]string{}
	for key, value := range want {
		if _, ok := pv.Annotations[key]; !ok {
			missing[key] = value
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return missing
}
