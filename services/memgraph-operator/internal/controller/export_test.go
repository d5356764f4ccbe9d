package controller

import "github.com/prometheus/client_golang/prometheus/testutil"

// StateSeries counts the cluster_state_info series of the operator named operator.
func StateSeries(operator string) int { return testutil.CollectAndCount(metricsFor(operator).state) }
