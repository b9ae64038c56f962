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

package fleet

import (
	"fmt"
	"net/http"

	"k8s.io/client-go/kubernetes"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/provfleet/provfleet/internal/fairlimit"
	"github.com/provfleet/provfleet/pkg/generated/clientset/versioned"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// dependencies are the clients and builders a Manager uses; tests replace
// them with fakes.
type dependencies struct {
	client kubernetes.Interface
	pcfg   versioned.Interface
	// events writes Events with a budget of its own; nil: through client.
	events typedcorev1.EventsGetter
	// tenants builds each provisioner's client and provision controller.
	tenants tenants
	// stop releases what the dependencies hold, after every instance stopped.
	stop func()
}

// tenants builds what each provisioner of the fleet runs on: its client,
// which spends its share of the fleet's budgets, and its provision
// controller. tenantBuilder is the fleet's.
type tenants interface {
	clientFor(provisionerName string) (provisioning.Client, error)
	newController(cfg provisioning.Config, deps provisioning.Dependencies) (controller, error)
}

// budgets are the fleet's API client budgets: the one shared fairly by every
// tenant's requests, and the separate token buckets of Lease and Event writes.
type budgets struct {
	shared *fairlimit.Limiter
	leases flowcontrol.RateLimiter
	events flowcontrol.RateLimiter
}

func newBudgets(settings Settings) budgets {
	return budgets{
		shared: fairlimit.New(settings.QPS, settings.Burst),
		leases: flowcontrol.NewTokenBucketRateLimiter(leaseBudget(settings)),
		events: flowcontrol.NewTokenBucketRateLimiter(eventBudget(settings)),
	}
}

// stop fails whatever still waits for a budget.
func (b budgets) stop() {
	b.shared.Stop()
	b.events.Stop()
	b.leases.Stop()
}

// eventBudget is the QPS and burst of the fleet's Event writes: a token bucket
// of their own, apart from the shared budget, since Events are written by one
// sink for every tenant and must never delay anyone's provisioning.
func eventBudget(settings Settings) (float32, int) {
	qps, burst := settings.EventQPS, settings.EventBurst
	if qps <= 0 {
		qps = settings.QPS / 5
	}
	if burst <= 0 {
		burst = max(1, settings.Burst/2)
	}
	return qps, burst
}

// leaseBudget is the QPS and burst of the provisioners' Lease writes: a token
// bucket of their own, apart from the shared budget, since a Lease that is not
// renewed in time stops its provisioner whatever its backlog. Renewals are
// bounded by the number of provisioners over the renew interval.
func leaseBudget(settings Settings) (float32, int) {
	qps, burst := settings.LeaseQPS, settings.LeaseBurst
	if qps <= 0 {
		qps = 200
	}
	if burst <= 0 {
		burst = 400
	}
	return qps, burst
}

// newDependencies builds every client of the fleet on one HTTP client (and
// connection pool) for config, each naming its requests and spending its
// budget.
func newDependencies(config *rest.Config, b budgets) (dependencies, error) {
	httpClient, err := rest.HTTPClientFor(config)
	if err != nil {
		return dependencies{}, fmt.Errorf("cannot build the HTTP client: %w", err)
	}
	clients := tenantBuilder{config: config, http: httpClient, budgets: b}
	managerConfig := clients.configFor(managerTenant, b.shared.Tenant(managerTenant))
	managerHTTP := httpClientNamed(httpClient, managerTenant)
	client, err := kubernetes.NewForConfigAndClient(managerConfig, managerHTTP)
	if err != nil {
		return dependencies{}, fmt.Errorf("cannot build the manager's client: %w", err)
	}
	pcfg, err := versioned.NewForConfigAndClient(managerConfig, managerHTTP)
	if err != nil {
		return dependencies{}, fmt.Errorf("cannot build the ProvisionerConfig client: %w", err)
	}
	events, err := typedcorev1.NewForConfigAndClient(clients.configFor(eventsUserAgent, b.events), httpClientNamed(httpClient, eventsUserAgent))
	if err != nil {
		return dependencies{}, fmt.Errorf("cannot build the Event client: %w", err)
	}
	return dependencies{
		client:  client,
		pcfg:    pcfg,
		events:  events,
		tenants: clients,
		stop:    b.stop,
	}, nil
}

// tenantBuilder builds the clients of the fleet, which share one HTTP
// client, and its provision controllers.
type tenantBuilder struct {
	config  *rest.Config
	http    *http.Client
	budgets budgets
}

// configFor returns a copy of the fleet's config whose requests are named
// userAgent and spend limiter.
func (c tenantBuilder) configFor(userAgent string, limiter flowcontrol.RateLimiter) *rest.Config {
	config := rest.CopyConfig(c.config)
	config.UserAgent = userAgent
	config.RateLimiter = limiter
	return config
}

// clientFor builds the client of one provisioner, a tenant of the shared
// budget of its own.
func (c tenantBuilder) clientFor(provisionerName string) (provisioning.Client, error) {
	tenant := "provfleet/" + provisionerName
	client, err := newProvisionerClient(c.configFor(tenant, c.budgets.shared.Tenant(tenant)), c.configFor(tenant, c.budgets.leases),
		httpClientNamed(c.http, tenant))
	if err != nil {
		return nil, fmt.Errorf("cannot build the client of %q: %w", provisionerName, err)
	}
	return client, nil
}

// newController builds one provision controller.
func (tenantBuilder) newController(cfg provisioning.Config, deps provisioning.Dependencies) (controller, error) {
	return provisioning.New(cfg, deps)
}

// httpClientNamed shares the connections of shared and names its requests
// userAgent. A REST client built on a given HTTP client leaves its config's
// UserAgent unused: client-go sets it in the transport.
func httpClientNamed(shared *http.Client, userAgent string) *http.Client {
	base := shared.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	named := *shared
	named.Transport = transport.NewUserAgentRoundTripper(userAgent, base)
	return &named
}

// provisionerClient is one provisioner's client: the two API groups a
// controller calls, the core group with the provisioner's share of the budget and the
// Leases with the fleet's Lease budget. A whole clientset per provisioner
// would build some sixty REST clients, most of an idle provisioner's memory.
type provisionerClient struct {
	core         typedcorev1.CoreV1Interface
	coordination typedcoordinationv1.CoordinationV1Interface
}

func newProvisionerClient(config, leaseConfig *rest.Config, httpClient *http.Client) (provisionerClient, error) {
	core, err := typedcorev1.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return provisionerClient{}, err
	}
	coordination, err := typedcoordinationv1.NewForConfigAndClient(leaseConfig, httpClient)
	if err != nil {
		return provisionerClient{}, err
	}
	return provisionerClient{core: core, coordination: coordination}, nil
}

func (c provisionerClient) CoreV1() typedcorev1.CoreV1Interface { return c.core }

func (c provisionerClient) CoordinationV1() typedcoordinationv1.CoordinationV1Interface {
	return c.coordination
}
