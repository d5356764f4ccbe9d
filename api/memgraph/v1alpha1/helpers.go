package v1alpha1

// Reference is the image reference a container runs: repository@digest when a digest is
// set (it pins the image, so the tag is ignored), else repository:tag; empty fields fall
// back to the schema defaults.
func (s ImageSpec) Reference() string {
	repo := s.Repository
	if repo == "" {
		repo = DefaultImageRepository
	}
	if s.Digest != "" {
		return repo + "@" + s.Digest
	}
	tag := s.Tag
	if tag == "" {
		tag = DefaultImageTag
	}
	return repo + ":" + tag
}

// WhenScaled is what happens to the claims of instances a scale-down retires:
// RetentionPolicyWhenScaled when set, else RetentionPolicy (the one field both follow
// unless told otherwise), else the default.
func (s StorageSpec) WhenScaled() RetentionAction {
	if s.RetentionPolicyWhenScaled != nil && *s.RetentionPolicyWhenScaled != "" {
		return *s.RetentionPolicyWhenScaled
	}
	return s.WhenDeleted()
}

// WhenDeleted is what happens to the claims when the MemgraphCluster is deleted.
func (s StorageSpec) WhenDeleted() RetentionAction {
	if s.RetentionPolicy == "" {
		return DefaultRetention
	}
	return s.RetentionPolicy
}
