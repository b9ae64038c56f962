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

package hostpathnodes

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// coordinatorMetrics are the series of the coordinators of one registry,
// shared by all of them, each labelled with its provisioner name.
type coordinatorMetrics struct {
	removedNodeVolumes *prometheus.GaugeVec
}

// newCoordinatorMetrics creates the coordinators' series and registers them
// with reg. Call it once per registry.
func newCoordinatorMetrics(reg prometheus.Registerer) (*coordinatorMetrics, error) {
	m := &coordinatorMetrics{
		removedNodeVolumes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "provisioner_removed_node_volumes",
			Help: "Number of PersistentVolumes of a hostPath provisioner whose node has no Node object, as its leader last counted them.",
		}, []string{"provisioner"}),
	}
	if err := reg.Register(m.removedNodeVolumes); err != nil {
		return nil, fmt.Errorf("cannot register the coordinators' metrics: %w", err)
	}
	return m, nil
}

// setRemovedNodeVolumes records how many volumes of provisioner lost their
// node.
func (m *coordinatorMetrics) setRemovedNodeVolumes(provisioner string, n int) {
	m.removedNodeVolumes.WithLabelValues(provisioner).Set(float64(n))
}

// deleteSeries drops the series of provisioner: only a leader counts.
func (m *coordinatorMetrics) deleteSeries(provisioner string) {
	m.removedNodeVolumes.DeleteLabelValues(provisioner)
}
