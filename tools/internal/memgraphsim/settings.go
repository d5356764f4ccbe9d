package memgraphsim

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Coordinator settings: what SET COORDINATOR SETTING changes and SHOW COORDINATOR
// SETTINGS lists (Memgraph 3.12's names, order and defaults). They live in the Raft state,
// so every coordinator answers the same once the change has committed.
const (
	settingEnabledReadsOnMain      = "enabled_reads_on_main"
	settingSyncFailoverOnly        = "sync_failover_only"
	settingMaxFailoverReplicaLag   = "max_failover_replica_lag"
	settingMaxReplicaReadLag       = "max_replica_read_lag"
	settingDeltasBatchProgressSize = "deltas_batch_progress_size"
	settingInstanceDownTimeoutSec  = "instance_down_timeout_sec"
	settingHealthCheckFrequencySec = "instance_health_check_frequency_sec"
	settingGlobalReadOnly          = "global_read_only"
)

var settingOrder = []string{settingEnabledReadsOnMain, settingSyncFailoverOnly, settingMaxFailoverReplicaLag,
	settingMaxReplicaReadLag, settingDeltasBatchProgressSize, settingInstanceDownTimeoutSec,
	settingHealthCheckFrequencySec, settingGlobalReadOnly}

func errUnknownSetting(name string) string {
	return "Setting " + name + " doesn't exist on coordinators."
}
func errInvalidSetting(name string) string {
	return "Invalid argument detected while trying to update setting " + name
}

// settingDefault is a setting's value before anyone set it. The health timings start from
// the flags (--instance-down-timeout-sec, --instance-health-check-frequency-sec), shown in
// whole seconds rounded up.
func (c *coordinator) settingDefault(name string) string {
	secs := func(d time.Duration) string { return strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10) }
	switch name {
	case settingSyncFailoverOnly:
		return "true"
	case settingMaxFailoverReplicaLag, settingMaxReplicaReadLag:
		return strconv.FormatUint(math.MaxUint64, 10)
	case settingDeltasBatchProgressSize:
		return "100000"
	case settingInstanceDownTimeoutSec:
		return secs(c.opts.InstanceDownTimeout)
	case settingHealthCheckFrequencySec:
		return secs(c.opts.HealthCheckInterval)
	}
	return "false"
}

// setting is a setting's current value in this coordinator's Raft state.
func (c *coordinator) setting(st clusterState, name string) string {
	if v, ok := st.Settings[name]; ok {
		return v
	}
	return c.settingDefault(name)
}

func (c *coordinator) settingsRows() [][]any {
	st := c.fsm.state()
	rows := make([][]any, 0, len(settingOrder))
	for _, n := range settingOrder {
		rows = append(rows, []any{n, c.setting(st, n)})
	}
	return rows
}

// normalizeSetting checks a value as Memgraph does and returns it as SHOW COORDINATOR
// SETTINGS will list it: enabled_reads_on_main and sync_failover_only are true only for
// "true" (any case; anything else is false), global_read_only must be true or false,
// the rest unsigned integers, the health check period at least 1.
func normalizeSetting(name, value string) (string, string) {
	switch name {
	case settingEnabledReadsOnMain, settingSyncFailoverOnly:
		return strconv.FormatBool(strings.EqualFold(value, "true")), ""
	case settingGlobalReadOnly:
		switch strings.ToLower(value) {
		case "true", "false":
			return strings.ToLower(value), ""
		}
		return "", errInvalidSetting(name)
	case settingMaxFailoverReplicaLag, settingMaxReplicaReadLag, settingDeltasBatchProgressSize:
		n, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			return "", errInvalidSetting(name)
		}
		return strconv.FormatUint(n, 10), ""
	case settingInstanceDownTimeoutSec, settingHealthCheckFrequencySec:
		n, err := strconv.ParseUint(value, 10, 32)
		if err != nil || (name == settingHealthCheckFrequencySec && n < 1) {
			return "", errInvalidSetting(name)
		}
		return strconv.FormatUint(n, 10), ""
	}
	return "", errUnknownSetting(name)
}

// setSetting is SET COORDINATOR SETTING on the leader.
func (c *coordinator) setSetting(cmd Command) error {
	v, msg := normalizeSetting(cmd.Setting, cmd.SettingValue)
	if msg != "" {
		return failure("%s", msg)
	}
	return c.apply(fsmCommand{Op: "setting", Name: cmd.Setting, Value: v})
}

// secondsSetting is a duration setting: the flag's value (which tests set below a second)
// until SET COORDINATOR SETTING changes it.
func (c *coordinator) secondsSetting(name string, flag time.Duration) time.Duration {
	v, ok := c.fsm.state().Settings[name]
	if !ok {
		return flag
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return flag
	}
	return time.Duration(n) * time.Second
}

// downTimeout is instance_down_timeout_sec: no successful health check for this long and
// an instance is down (a MAIN then fails over).
func (c *coordinator) downTimeout() time.Duration {
	return c.secondsSetting(settingInstanceDownTimeoutSec, c.opts.InstanceDownTimeout)
}

// checkInterval is instance_health_check_frequency_sec.
func (c *coordinator) checkInterval() time.Duration {
	return c.secondsSetting(settingHealthCheckFrequencySec, c.opts.HealthCheckInterval)
}

// failoverRules are the settings failover applies: with syncOnly an ASYNC replica is
// never promoted; a replica more than maxLag transactions behind the MAIN's last count is
// left out.
func (c *coordinator) failoverRules(st clusterState) (syncOnly bool, maxLag uint64) {
	syncOnly = c.setting(st, settingSyncFailoverOnly) == "true"
	maxLag, err := strconv.ParseUint(c.setting(st, settingMaxFailoverReplicaLag), 10, 64)
	if err != nil {
		maxLag = math.MaxUint64
	}
	return syncOnly, maxLag
}
