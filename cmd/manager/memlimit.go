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
	"runtime/debug"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
)

// outsideGoReserve is what the kernel charges a container for this process
// besides the memory of the Go runtime, which GOMEMLIMIT counts alone: the
// pages of the binary it maps (27 to 30 MiB measured, bench/results) and
// the kernel's own memory for it (sockets, directory entries).
const outsideGoReserve = 32 << 20

// goMemoryLimit is the Go runtime's soft memory limit for a container
// limited to containerLimit bytes: the limit less outsideGoReserve, or half
// the limit when the reserve would take more. ok is false where no limit is
// set or GOMEMLIMIT is, which the runtime already applied.
func goMemoryLimit(containerLimit int64, env environment) (limit int64, ok bool) {
	if containerLimit <= 0 || env.getenv("GOMEMLIMIT") != "" {
		return 0, false
	}
	return max(containerLimit-outsideGoReserve, containerLimit/2), true
}

// setGoMemoryLimit applies goMemoryLimit, so the collector works harder as
// the heap nears the container's limit instead of the kernel reclaiming the
// binary's code pages and then killing the process.
func setGoMemoryLimit(ctx context.Context, containerLimit int64, env environment) {
	limit, ok := goMemoryLimit(containerLimit, env)
	if !ok {
		return
	}
	debug.SetMemoryLimit(limit)
	klog.FromContext(ctx).V(1).Info("Set the Go memory limit from the container's", "containerLimitBytes", containerLimit, "goMemoryLimitBytes", limit)
}

// byteQuantity is a flag holding a positive quantity of bytes, written as
// Kubernetes writes one (128Mi, 134217728); zero while unset.
type byteQuantity int64

func (q *byteQuantity) String() string {
	if *q == 0 {
		return ""
	}
	return strconv.FormatInt(int64(*q), 10)
}

func (q *byteQuantity) Set(s string) error {
	parsed, err := resource.ParseQuantity(s)
	if err != nil || parsed.Sign() <= 0 {
		return fmt.Errorf("%q is not a positive quantity of bytes", s)
	}
	*q = byteQuantity(parsed.Value())
	return nil
}

func (q *byteQuantity) Type() string { return "quantity" }
