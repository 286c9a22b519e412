package state

// Test access to the embedded backend's internals.

// IsOwner reports whether b (an embedded backend) owns the stores now.
func IsOwner(b Backend) bool { return b.(*embedded).isOwner() }

// SetHook makes b's server (when b is or becomes the owner) call fn after
// running each request and before answering it.
func SetHook(b Backend, fn func(op byte)) { b.(*embedded).hook.Store(&fn) }

// Crash stops b like a kill -9 of its process: when b is the owner, its
// connections break unanswered and the lock is released.
func Crash(b Backend) {
	e := b.(*embedded)
	e.mu.Lock()
	e.closed = true
	own, cc, draining := e.own, e.cc, e.draining
	e.own, e.cc, e.draining = nil, nil, nil
	e.mu.Unlock()
	for _, d := range draining {
		d.close()
	}
	if cc != nil {
		cc.close()
	}
	if own != nil {
		own.kill()
	}
}

// OpCreate is the op code of Create, for hooks.
const OpCreate = opCreate
