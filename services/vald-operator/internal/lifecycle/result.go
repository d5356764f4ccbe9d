// Package lifecycle runs an ordered list of phases over a list of conditions: each phase is
// a condition type; conditions accumulate and are never removed; every pass re-evaluates
// every phase reached and halts at the first that has not succeeded, so a phase that breaks
// later (a deleted object, an edited spec) goes back and recovers by itself.
package lifecycle

import (
	"errors"
	"fmt"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Result is what a phase's desired state reports; it maps one to one to a condition's
// status and reason. Messages must be stable for a given spec: a message that changes on
// every pass (names of random objects, raw errors, counters) rewrites status forever.
type Result struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// Progressing: the controller is doing the phase's work (status Unknown).
func Progressing(msg string) Result {
	return Result{Status: metav1.ConditionUnknown, Reason: valdv1.ReasonProgressing, Message: msg}
}

// Pending: the phase waits for something outside the controller (status Unknown).
func Pending(msg string) Result {
	return Result{Status: metav1.ConditionUnknown, Reason: valdv1.ReasonPending, Message: msg}
}

// Succeeded: the phase is done (status True).
func Succeeded(msg string) Result {
	return Result{Status: metav1.ConditionTrue, Reason: valdv1.ReasonSucceeded, Message: msg}
}

// Failed: the phase cannot succeed until a person changes the spec (status False).
func Failed(msg string) Result {
	return Result{Status: metav1.ConditionFalse, Reason: valdv1.ReasonFailed, Message: msg}
}

// Blocked: a phase before this one no longer succeeds (status Unknown).
func Blocked(msg string) Result {
	return Result{Status: metav1.ConditionUnknown, Reason: valdv1.ReasonBlocked, Message: msg}
}

// Succeeded reports whether the result lets the lifecycle go on.
func (r Result) Succeeded() bool { return r.Status == metav1.ConditionTrue }

// Waiting reports whether the result is worth checking again after a while (Progressing,
// Pending or Blocked), as opposed to Succeeded or Failed.
func (r Result) Waiting() bool { return r.Status == metav1.ConditionUnknown }

func (r Result) condition(condType string) metav1.Condition {
	return metav1.Condition{Type: condType, Status: r.Status, Reason: r.Reason, Message: r.Message}
}

// RetryError is a transient failure with the stable message its phase's condition shows
// while the controller retries (the raw error goes to the log, never to a condition).
type RetryError struct {
	Message string
	Err     error
	// External marks a cause outside the controller (a name another owner holds): the
	// condition is Pending rather than Progressing.
	External bool
}

func (e *RetryError) Error() string { return e.Err.Error() }
func (e *RetryError) Unwrap() error { return e.Err }

// Retry wraps err with the condition message to show while it is retried.
func Retry(message string, err error) error { return &RetryError{Message: message, Err: err} }

// WaitFor wraps err, caused by something outside the controller and the spec, with the
// condition message to show (Pending) while it is retried.
func WaitFor(message string, err error) error {
	return &RetryError{Message: message, Err: err, External: true}
}

// retryResult is the condition of a phase halted by err: Pending with the RetryError's
// message when its cause is external, Progressing with it otherwise, and without one
// Progressing with a message naming the API server's reason (stable for a given cause).
func retryResult(err error) Result {
	var r *RetryError
	switch {
	case errors.As(err, &r) && r.External:
		return Pending(r.Message)
	case errors.As(err, &r):
		return Progressing(r.Message)
	}
	return Progressing(retryMessage(err))
}

// retryMessage is the message of a transient err without a RetryError: it names the API
// server's reason.
func retryMessage(err error) string {
	reason := string(apierrors.ReasonForError(err))
	if reason == "" {
		reason = "an error"
	}
	return fmt.Sprintf("A request to the API server failed (%s); retrying. The operator's log has the details.", reason)
}
