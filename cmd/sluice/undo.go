package main

// undo is what a server being started has opened, to be closed last first:
// each step that opens something adds its close. A start that fails part
// way runs it (deferred, on error), and a server that started runs it when
// it stops, so no error path closes anything by hand.
type undo []func()

// add adds f, to run before everything added so far.
func (u *undo) add(f func()) { *u = append(*u, f) }

// run runs everything added, the last first, once.
func (u *undo) run() {
	for i := len(*u) - 1; i >= 0; i-- {
		(*u)[i]()
	}
	*u = nil
}
