// Package api is the root of the CRD types of the operator suite; each product has one
// package per group/version below it.
package api
