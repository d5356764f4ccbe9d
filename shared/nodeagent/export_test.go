package nodeagent

import "time"

// SetClock lets tests move a TokenRequester's clock.
func (r *TokenRequester) SetClock(now func() time.Time) { r.now = now }
