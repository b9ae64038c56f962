// Package backend holds what the built-in directory backends (hostpath, nfs)
// share with the code that configures them: the onDelete policies, the capacity
// budget, the runtime options and the error classes a caller maps to a
// ProvisionerConfig's Ready reason.
package backend
