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

package testenv

import (
	"fmt"
	"slices"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Warnings keeps the warnings of the API server's answers to a client, such
// as those of Pod Security admission; it is a rest.WarningHandler.
type Warnings struct {
	mu   sync.Mutex
	seen []string
}

// HandleWarningHeader keeps the warning's text.
func (w *Warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

// List returns the warnings kept so far.
func (w *Warnings) List() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}

// WarningClient returns a client of config whose answers' warnings the
// returned Warnings keeps.
func WarningClient(config *rest.Config) (kubernetes.Interface, *Warnings, error) {
	warnings := &Warnings{}
	config = rest.CopyConfig(config)
	config.WarningHandler = warnings
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot build a client: %w", err)
	}
	return client, warnings, nil
}
