// Package fleet runs one provisioning.Controller per ProvisionerConfig object.
// A Manager watches ProvisionerConfigs and starts, re-tunes or stops each
// instance, shares one set of claim, volume, class and node informers and one
// API client budget across the whole fleet, and reports every object's state in
// its status.
package fleet
