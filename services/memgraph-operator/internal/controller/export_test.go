package controller

import "github.com/prometheus/client_golang/prometheus/testutil"

// StateSeries counts the cluster_state_info series of the operator named operator.
func StateSeries(operator string) int { return testutil.CollectAndCount(metricsFor(operator).state) }

// Commands reads the registration_commands_total counter of the operator named operator.
func Commands(operator string) float64 { return testutil.ToFloat64(metricsFor(operator).commands) }
