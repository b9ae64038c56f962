// Package backendtest holds test helpers shared by the directory backends:
// claim builders, filesystem snapshots that prove nothing outside a base
// directory changed, and checks of their record of unsaved volumes.
package backendtest
