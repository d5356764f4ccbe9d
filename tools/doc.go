// Package tools pins the suite's developer tools; see go.mod's tool directives.
package tools
