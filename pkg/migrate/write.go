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
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// Write prints the plan as YAML that kubectl applies: the ProvisionerConfig,
// with the rest of the plan in comments: the old provisioner, whether it
// still runs, the refusals, the notes and every old volume's fate and
// what is recorded on it.
func Write(w io.Writer, p *Plan) error {
	var b bytes.Buffer
	p.writeHeader(&b)
	if p.Config != nil {
		config, err := configYAML(p)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(config)
	}
	if err := p.writeVolumes(&b); err != nil {
		return err
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("cannot write the plan: %w", err)
	}
	return nil
}

func (p *Plan) writeHeader(b *bytes.Buffer) {
	fmt.Fprintf(b, "# Migration from %s: Deployment %s, image %s, release %s\n", p.From, p.Deployment, p.Image, orNone(p.Version))
	fmt.Fprintf(b, "# Provisioner name taken over: %s, of the StorageClasses %s, kept as they are\n", orNone(p.OldName), orNone(strings.Join(p.Classes, ", ")))
	if len(p.Running) == 0 {
		b.WriteString("# The old provisioner is gone: no replica asked for, no pod left.\n")
	} else {
		fmt.Fprintf(b, "# The old provisioner still runs (%s): scale it to zero before applying, or both provision.\n", strings.Join(p.Running, "; "))
	}
	if len(p.Refusals) > 0 {
		b.WriteString("#\n# Refused: nothing is applied until each is resolved.\n")
		for _, r := range p.Refusals {
			fmt.Fprintf(b, "#   %s: %s\n", r.Object, r.Reason)
		}
	}
	if len(p.Notes) > 0 {
		b.WriteString("#\n# Check by hand:\n")
		for _, note := range p.Notes {
			fmt.Fprintf(b, "#   %s\n", note)
		}
	}
}

// writeVolumes prints each old volume's fate and what Apply records on it.
func (p *Plan) writeVolumes(b *bytes.Buffer) error {
	fmt.Fprintf(b, "#\n# %d PersistentVolumes of %s, with the fate of their directories when released:\n", len(p.Volumes), orNone(p.OldName))
	if len(p.Volumes) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#   NAME\tCLASS\tFATE\tRECORDED BY APPLY")
	for _, v := range p.Volumes {
		fmt.Fprintf(tw, "#   %s\t%s\t%s\t%s\n", v.PV.Name, orNone(v.PV.Spec.StorageClassName), v.Fate, annotationList(v.Record))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("cannot write the volumes of the plan: %w", err)
	}
	return nil
}

// configYAML returns the plan's ProvisionerConfig as YAML, without the
// empty fields and status a typed object carries.
func configYAML(p *Plan) ([]byte, error) {
	object, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p.Config)
	if err != nil {
		return nil, fmt.Errorf("cannot encode ProvisionerConfig %s: %w", p.Config.Name, err)
	}
	delete(object, "status")
	pruneEmpty(object)
	out, err := yaml.Marshal(object)
	if err != nil {
		return nil, fmt.Errorf("cannot encode ProvisionerConfig %s: %w", p.Config.Name, err)
	}
	return out, nil
}

// pruneEmpty removes the nil values and empty maps of object, deepest
// first.
func pruneEmpty(object map[string]any) {
	for key, value := range object {
		if child, ok := value.(map[string]any); ok {
			pruneEmpty(child)
			if len(child) == 0 {
				delete(object, key)
			}
		}
		if value == nil {
			delete(object, key)
		}
	}
}

func annotationList(annotations map[string]string) string {
	if len(annotations) == 0 {
		return "-"
	}
	var pairs []string
	for _, key := range slices.Sorted(maps.Keys(annotations)) {
		pairs = append(pairs, key+"="+annotations[key])
	}
	return strings.Join(pairs, ",")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
