// Package shared is the root of libraries that know no single product.
package shared
