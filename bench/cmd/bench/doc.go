// Command bench runs the provfleet benchmark against a fresh control plane
// and writes bench/results/<UTC date>.md and latest.jsonl; -smoke runs every
// scenario at toy size to prove the harness works.
package main
