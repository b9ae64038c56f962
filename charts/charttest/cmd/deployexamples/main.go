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
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/provfleet/provfleet/charts/charttest"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	values := flag.String("values", "", "the values file to render the chart with; empty: values.yaml beside this command")
	out := flag.String("out", "", "the folder to write; empty: examples/deploy under -root")
	flag.Parse()
	if err := run(context.Background(), *root, *values, *out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// valuesFile is the values file of examples/deploy, from the repository's
// root.
const valuesFile = "charts/charttest/cmd/deployexamples/values.yaml"

func run(ctx context.Context, root, values, out string) error {
	if values == "" {
		values = filepath.Join(root, valuesFile)
	}
	if out == "" {
		out = filepath.Join(root, "examples", "deploy")
	}
	source, err := filepath.Rel(root, values)
	if err != nil {
		return fmt.Errorf("cannot name %s from the repository's root: %w", values, err)
	}
	vals, err := chartutil.ReadValuesFile(values)
	if err != nil {
		return fmt.Errorf("cannot read the values: %w", err)
	}
	rel, err := charttest.Render(ctx, charttest.ChartDir(root), vals)
	if err != nil {
		return err
	}
	files, err := charttest.DeployExamples(rel.Manifest, filepath.ToSlash(source))
	if err != nil {
		return err
	}
	return replaceFiles(out, files)
}

// replaceFiles writes files into dir and removes the YAML files of dir that
// are not among them.
func replaceFiles(dir string, files map[string]string) error {
	old, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return fmt.Errorf("cannot list %s: %w", dir, err)
	}
	for _, path := range old {
		if _, ok := files[filepath.Base(path)]; !ok {
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("cannot remove %s: %w", path, err)
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot make %s: %w", dir, err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("cannot write %s: %w", name, err)
		}
	}
	return nil
}
