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
