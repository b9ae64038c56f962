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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/api/v1alpha1"
	provfleetclient "github.com/provfleet/provfleet/pkg/generated/clientset/versioned/typed/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// Apply carries out p, when Applicable: it records each old volume's fate,
// then creates the ProvisionerConfig. The fates come first, since a
// provisioner that runs may release a volume at once, by whatever the
// volume records then. A volume changed since the plan was made is not
// overwritten: its record fails with a conflict, and the plan is to be
// made again. A ProvisionerConfig of the plan's name that exists already
// is left as it is when it answers to the old name, as after an earlier
// run, and refused, before anything changes, when it does not.
func Apply(ctx context.Context, volumes corev1client.PersistentVolumeInterface, configs provfleetclient.ProvisionerConfigInterface, p *Plan) error {
	if err := p.Applicable(); err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("provisionerConfig", klog.KObj(p.Config))
	exists, err := configInPlace(ctx, configs, p)
	if err != nil {
		return err
	}
	for _, v := range p.Volumes {
		if len(v.Record) == 0 {
			continue
		}
		vctx := klog.NewContext(ctx, logger.WithValues("pv", klog.KObj(v.PV)))
		if _, err := provisioning.RecordOnVolume(vctx, volumes, v.PV, v.Record); err != nil {
			return fmt.Errorf("cannot record the fate of PersistentVolume %s (nothing after it was changed; make the plan again): %w", v.PV.Name, err)
		}
	}
	if exists {
		logger.Info("The ProvisionerConfig exists already and answers to the old name; left as it is")
		return nil
	}
	if _, err := configs.Create(ctx, p.Config, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cannot create ProvisionerConfig %s: %w", p.Config.Name, err)
	}
	logger.Info("Created the ProvisionerConfig")
	return nil
}

// configInPlace reports whether the plan's ProvisionerConfig exists
// already, made by an earlier run; one of its name that does not answer to
// the old provisioner's name is an error.
func configInPlace(ctx context.Context, configs provfleetclient.ProvisionerConfigInterface, p *Plan) (bool, error) {
	existing, err := configs.Get(ctx, p.Config.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cannot read ProvisionerConfig %s: %w", p.Config.Name, err)
	}
	if !slices.Contains(existing.Spec.AdditionalProvisionerNames, v1alpha1.ProvisionerName(p.OldName)) {
		return false, fmt.Errorf("ProvisionerConfig %s exists already and does not answer to %s: choose another name with --name", p.Config.Name, p.OldName)
	}
	return true, nil
}
