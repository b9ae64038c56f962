// Package backend holds what the built-in directory backends (hostpath, nfs)
// share with the code that configures them: the onDelete policies, the capacity
// budget, the runtime options and the error classes a caller maps to a
// ProvisionerConfig's Ready reason, and the index of PersistentVolumes by the
// paths they name, through which a backend finds the volumes a new directory
// would overlap without going through every volume.
package backend
