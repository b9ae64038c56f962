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
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/provfleet/provfleet/pkg/generated/clientset/versioned"
	provfleetclient "github.com/provfleet/provfleet/pkg/generated/clientset/versioned/typed/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/migrate"
)

// migrateCommand is the first argument that runs the migration plan
// instead of the manager.
const migrateCommand = "migrate"

// migrateOptions are the command line of manager migrate.
type migrateOptions struct {
	kubeconfig string
	dryRun     bool
	plan       migrate.Options
}

// parseMigrateOptions parses the arguments after "migrate".
func parseMigrateOptions(args []string) (*migrateOptions, error) {
	o := &migrateOptions{}
	var from, deployment string
	fs := pflag.NewFlagSet("manager migrate", pflag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Empty: $KUBECONFIG, else the in-cluster configuration.")
	fs.StringVar(&from, "from", "", fmt.Sprintf("The provisioner to migrate from: %s.", sourceList()))
	fs.BoolVar(&o.dryRun, "dry-run", false, "Print the plan and change nothing. Without it the plan is printed, then applied when nothing is refused and the old provisioner is gone: each old volume's fate recorded on it, then the ProvisionerConfig created.")
	fs.StringVar(&deployment, "deployment", "", "The old provisioner's Deployment, <namespace>/<name>. Empty: the one Deployment of the cluster that runs its image.")
	fs.StringVar(&o.plan.Name, "name", "", "Name of the ProvisionerConfig, whose provisionerName is provfleet.io/<name>. Empty: the Deployment's name.")
	fs.StringVar(&o.plan.Version, "version", "", "The old provisioner's release, such as v4.0.2, where its image's tag does not say it.")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: manager migrate --from %s [--dry-run] [flags]\n\n"+
			"Plans the move of the old provisioner's StorageClasses and PersistentVolumes to a ProvisionerConfig, and applies it unless --dry-run.\n\n%s",
			strings.Join(sourceNames(), "|"), fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.plan.From = migrate.Source(from)
	if !slices.Contains(migrate.Sources, o.plan.From) {
		return nil, fmt.Errorf("--from must be one of %s, not %q", sourceList(), from)
	}
	if deployment != "" {
		namespace, name, ok := strings.Cut(deployment, "/")
		if !ok || namespace == "" || name == "" {
			return nil, fmt.Errorf("--deployment must be <namespace>/<name>, not %q", deployment)
		}
		o.plan.Deployment = types.NamespacedName{Namespace: namespace, Name: name}
	}
	return o, nil
}

func sourceNames() []string {
	var names []string
	for _, s := range migrate.Sources {
		names = append(names, string(s))
	}
	return names
}

func sourceList() string {
	return strings.Join(sourceNames(), " or ")
}

// runMigrate runs manager migrate with the clients of the kubeconfig.
func runMigrate(ctx context.Context, args []string, env environment) error {
	o, err := parseMigrateOptions(args)
	if err != nil {
		return err
	}
	config, err := clientConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("cannot make a client: %w", err)
	}
	provfleet, err := versioned.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("cannot make a client of ProvisionerConfigs: %w", err)
	}
	return migrateWith(ctx, o, migrateClients{
		kube:    kube,
		configs: provfleet.ProvfleetV1alpha1().ProvisionerConfigs(),
	}, env.stdout)
}

// migrateClients are what manager migrate reads and writes through.
type migrateClients struct {
	kube    kubernetes.Interface
	configs provfleetclient.ProvisionerConfigInterface
}

// migrateWith makes the plan, prints it to out and, without --dry-run,
// applies it.
func migrateWith(ctx context.Context, o *migrateOptions, clients migrateClients, out io.Writer) error {
	plan, err := migrate.Make(ctx, clients.kube, o.plan)
	if err != nil {
		return err
	}
	if err := migrate.Write(out, plan); err != nil {
		return err
	}
	if o.dryRun {
		return nil
	}
	if err := migrate.Apply(ctx, clients.kube.CoreV1().PersistentVolumes(), clients.configs, plan); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(out, "# Applied: %d PersistentVolumes recorded, ProvisionerConfig %s in place.\n", recorded(plan), plan.Config.Name); err != nil {
		return fmt.Errorf("cannot write the outcome: %w", err)
	}
	return nil
}

// recorded counts the volumes Apply recorded a fate on.
func recorded(plan *migrate.Plan) int {
	n := 0
	for _, v := range plan.Volumes {
		if len(v.Record) > 0 {
			n++
		}
	}
	return n
}
