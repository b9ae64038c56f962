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

// Package fairlimit shares one API client budget fairly between the tenants of
// one process: the fleet's provisioners and the manager itself. Each tenant's
// REST client gets a TenantLimiter from Limiter.Tenant as its
// rest.Config.RateLimiter; requests come in as Wait, Accept and TryAccept calls
// and go out as tokens of one shared bucket of qps requests a second.
//
// Why not client-go's flowcontrol.NewTokenBucketRateLimiter: one bucket per
// tenant would multiply the process's budget by the number of provisioners,
// and one bucket shared by every client serves its callers in arrival order,
// so a provisioner retrying a thousand failing claims would delay another
// provisioner's first claim by a thousand requests. Here waiters are served
// least recent usage first, and a busy tenant leaves the burst in the bucket
// for tenants that were quiet, so a newly active tenant is served at API
// latency next to a backlog while a backlogged tenant alone still gets the
// full rate.
//
// What it keeps of client-go's flowcontrol.RateLimiter contract: a
// TenantLimiter is one; Wait blocks until a token is granted and returns ctx's
// error when ctx ends first, without spending a token; Accept blocks until a
// token is granted; TryAccept never blocks; QPS is the budget's rate. What
// differs: TryAccept refuses while another caller waits, so it never jumps the
// queue; Wait does not fail early when its deadline is shorter than the
// expected wait; Stop on a TenantLimiter does nothing, as the bucket is shared,
// and Limiter.Stop fails every pending and later Wait (Accept then returns
// without a token).
//
// Limiter.ObserveWaits has a function told how long each Wait and Accept
// waited, by tenant, so the process can export the budget's waiting time
// with the labels it chooses; the package itself has no metrics.
//
// Goroutines: one dispatcher, started when a caller has to wait and ending
// when nobody waits or the limiter stops; Limiter.Stop returns after it ended.
package fairlimit
