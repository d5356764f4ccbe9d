package controller

// heldReplicas is the replica count to apply before the registration pass: the declared
// count when the StatefulSet is new, unchanged or growing, and the live count while it
// shrinks. A StatefulSet is never lowered here: the pods on their way out must stay until
// the registration has taken them out of the cluster.
func heldReplicas(declared int32, live *int32) int32 {
	if live == nil || declared >= *live {
		return declared
	}
	return *live
}

// shrunkReplicas is the replica count a shrinking StatefulSet may go down to after the
// registration pass: below current, past every highest ordinal that has retired, and
// never below declared. first is the role's first ordinal; retired says whether the
// member at an ordinal has left the membership. A StatefulSet sheds its highest ordinals
// first, so one still-registered member stops the shrink at itself.
func shrunkReplicas(declared, current, first int32, retired func(ordinal int32) bool) int32 {
	n := current
	for n > declared && retired(first+n-1) {
		n--
	}
	return n
}
