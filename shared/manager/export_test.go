package manager

import (
	"k8s.io/apimachinery/pkg/util/cache"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// MetricsFilterWith is the metrics filter over the given reviewers (client-go's
// TokenReviewInterface and SubjectAccessReviewInterface, or wrappers of them), clock and
// cache size, so tests can count reviews and move time.
func MetricsFilterWith(tokens tokenReviewer, access accessReviewer, now cache.Clock, size int) metricsserver.Filter {
	return newMetricsAuth(tokens, access, now, size).filter
}

// Cache lifetimes, for tests.
const (
	TokenTTL = tokenTTL
	AllowTTL = allowTTL
	DenyTTL  = denyTTL
)
