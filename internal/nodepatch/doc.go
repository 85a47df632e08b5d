// Package nodepatch writes changes to a Node locked on the fields the
// change depends on, instead of on the whole object: a JSON patch tests
// those fields for the values the writer read, then sets what changed. It
// owns no policy: callers say which fields their change read. It must not
// be used for changes it cannot lock field by field; Write falls back to
// an optimistic lock on the whole node for those.
package nodepatch
