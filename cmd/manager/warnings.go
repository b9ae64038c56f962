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
	"sync"

	"k8s.io/klog/v2"
)

// onceWarnings logs each distinct warning of the API server once, where
// client-go's default logs one line a response: with --legacy-lock-namespace
// every provisioner reads a deprecated API (Endpoints) at each renewal.
type onceWarnings struct {
	mu   sync.Mutex
	seen map[string]bool
}

func newOnceWarnings() *onceWarnings { return &onceWarnings{seen: map[string]bool{}} }

func (w *onceWarnings) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, message string) {
	// As client-go's WarningLogger: only the code of RFC 7234 warnings.
	if code != 299 || message == "" {
		return
	}
	w.mu.Lock()
	first := !w.seen[message]
	w.seen[message] = true
	w.mu.Unlock()
	if first {
		klog.FromContext(ctx).Info("Warning from the API server, logged once", "warning", message)
	}
}
