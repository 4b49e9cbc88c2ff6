package harness

// Running reports whether the process was launched and has not exited.
func (b *BrokerProc) Running() bool {
	if b.Exited == nil {
		return false
	}
	select {
	case <-b.Exited:
		return false
	default:
		return true
	}
}
