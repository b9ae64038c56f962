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

// Package workqueue holds the work queues of a provision controller: a queue
// that starts its workers on demand, a retry rate limiter that can be re-tuned
// while it runs, and the retry bookkeeping that remembers, per item and object
// version, how often an item failed and whether it was given up on.
//
// In come items (Add, AddAfter, AddRateLimited), the function a worker runs
// and a MetricsProvider; out go items handed to workers (Get, Done). The queue
// runs one goroutine per busy worker, started when an item is queued and
// ended once no item is ready, and one runtime timer per delayed item: an idle
// queue holds no goroutine. Its metrics are computed from its state when
// scraped, without a ticker.
//
// Why not client-go's workqueue: its workers block in Get and each queue runs
// a goroutine for its delayed items and one for its in-flight metrics, so
// every idle queue costs goroutines, while one process runs hundreds of idle
// provisioners with several queues each. Its rate limiters cannot be re-tuned
// while they run, while a provisioner's retry settings change without a
// restart and keep every item's failure count. It asks its MetricsProvider
// for its series when it is made and tells it nothing when it shuts down,
// while a provisioner's queues have series only once used and delete them
// when it stops.
//
// What it keeps of client-go's contract: an item waits in the queue once
// however often it is added (dirty); no two workers hold the same item
// (processing); an item added while a worker holds it is processed again
// after Done; of two delays pending for one item, the earlier wins; a queue
// shut down takes no more items. The API reads like TypedRateLimitingInterface
// (Add, AddAfter, AddRateLimited, Forget, NumRequeues, Len, ShutDown) and
// RetryLimiter is a TypedRateLimiter (When, Forget, NumRequeues). Two things
// differ. Get never blocks: it tells the calling worker to end when no item
// is ready. ShutDown drops the queued and delayed items and waits for the
// workers to be Done with the items they hold, where client-go's ShutDown
// leaves the queued items to the workers and waits for nothing;
// ShutDownWithDrain bounds that wait and reports the queues still busy.
package workqueue
