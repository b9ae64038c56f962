// Package backendtest holds test helpers shared by the directory backends:
// claim builders and filesystem snapshots that prove nothing outside a base
// directory changed.
package backendtest
