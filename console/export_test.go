package console

// Routes are the patterns of c's routes, for the test that covers each.
func (c *Console) Routes() []string {
	var out []string
	for _, r := range c.routeList() {
		out = append(out, r.pattern)
	}
	return out
}
