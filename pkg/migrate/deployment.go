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
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// findDeployment returns the Deployment named, or else the one of the
// cluster, with the container that runs image (a repository's last
// component). Several such Deployments are an error that names them: which
// one is meant is the administrator's to say.
func findDeployment(ctx context.Context, client kubernetes.Interface, named types.NamespacedName, image string) (*appsv1.Deployment, *corev1.Container, error) {
	if named.Name != "" {
		d, err := client.AppsV1().Deployments(named.Namespace).Get(ctx, named.Name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("cannot read Deployment %s: %w", named, err)
		}
		container, err := provisionerContainer(d, image)
		if err != nil {
			return nil, nil, fmt.Errorf("cannot use Deployment %s: %w", named, err)
		}
		return d, container, nil
	}
	list, err := client.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("cannot list Deployments: %w", err)
	}
	var found []*appsv1.Deployment
	for i := range list.Items {
		if imageContainer(&list.Items[i], image) != nil {
			found = append(found, &list.Items[i])
		}
	}
	switch len(found) {
	case 0:
		return nil, nil, fmt.Errorf("no Deployment runs an image named %s: name the old provisioner's with --deployment <namespace>/<name>", image)
	case 1:
		return found[0], imageContainer(found[0], image), nil
	}
	var names []string
	for _, d := range found {
		names = append(names, d.Namespace+"/"+d.Name)
	}
	return nil, nil, fmt.Errorf("several Deployments run an image named %s (%s): choose one with --deployment <namespace>/<name>", image, strings.Join(names, ", "))
}

// provisionerContainer returns the container of d that runs image, or its
// only container.
func provisionerContainer(d *appsv1.Deployment, image string) (*corev1.Container, error) {
	if c := imageContainer(d, image); c != nil {
		return c, nil
	}
	if containers := d.Spec.Template.Spec.Containers; len(containers) == 1 {
		return &containers[0], nil
	}
	return nil, fmt.Errorf("no container runs an image named %s", image)
}

// imageContainer returns the first container of d whose image's repository
// ends in the component name, or nil.
func imageContainer(d *appsv1.Deployment, name string) *corev1.Container {
	for i, c := range d.Spec.Template.Spec.Containers {
		if imageName(c.Image) == name {
			return &d.Spec.Template.Spec.Containers[i]
		}
	}
	return nil
}

// splitImage returns the last component of an image reference's repository
// and its tag ("" when it has none).
func splitImage(image string) (name, tag string) {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(image, "/"); i >= 0 {
		image = image[i+1:]
	}
	name, tag, _ = strings.Cut(image, ":")
	return name, tag
}

func imageName(image string) string {
	name, _ := splitImage(image)
	return name
}

func imageTag(image string) string {
	_, tag := splitImage(image)
	return tag
}

// stillRunning returns how d still runs: replicas asked for, and pods of
// its selector that have not ended (a terminating pod still provisions
// until it stops). local-path-provisioner runs without leader election, so
// it and provfleet would both provision; nfs-subdir-external-provisioner
// may have it turned off too.
func stillRunning(ctx context.Context, client kubernetes.Interface, d *appsv1.Deployment) ([]string, error) {
	var running []string
	if d.Spec.Replicas == nil || *d.Spec.Replicas > 0 {
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		running = append(running, fmt.Sprintf("spec.replicas is %d", replicas))
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("cannot read the selector of Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	pods, err := client.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, fmt.Errorf("cannot list the pods of Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	for _, pod := range pods.Items {
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			running = append(running, fmt.Sprintf("pod %s is %s", pod.Name, podState(&pod)))
		}
	}
	return running, nil
}

func podState(pod *corev1.Pod) string {
	if pod.DeletionTimestamp != nil {
		return "terminating"
	}
	if pod.Status.Phase == "" {
		return "pending"
	}
	return strings.ToLower(string(pod.Status.Phase))
}

// errValueFrom refuses an environment variable set from elsewhere: its
// value is not in the Deployment.
var errValueFrom = errors.New("it is set with valueFrom; write its value into the Deployment's env, or run the plan with it known")

// envValue returns the value of the environment variable name of c, ""
// where c does not set it.
func envValue(c *corev1.Container, name string) (string, error) {
	for _, env := range c.Env {
		if env.Name != name {
			continue
		}
		if env.ValueFrom != nil {
			return "", fmt.Errorf("environment variable %s: %w", name, errValueFrom)
		}
		return env.Value, nil
	}
	return "", nil
}

// argValue returns the value of the command-line flag name (without
// dashes) in c's command and args, as urfave/cli and Go's flag package read
// it: -name or --name, followed by =value or by the next argument.
func argValue(c *corev1.Container, name string) (string, bool) {
	args := append(append([]string(nil), c.Command...), c.Args...)
	for i, arg := range args {
		flag, ok := strings.CutPrefix(arg, "-")
		if !ok {
			continue
		}
		flag = strings.TrimPrefix(flag, "-")
		if value, ok := strings.CutPrefix(flag, name+"="); ok {
			return value, true
		}
		if flag == name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}
