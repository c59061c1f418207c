package api

// Scopes is the route → scope table, for the test that holds it to the document.
var Scopes = scopes

// DecodeCursor and EncodeCursor expose the cursor codec to fuzzing.
func DecodeCursor(s string) (string, error) {
	c, err := decodeCursor(s)
	if err != nil {
		return "", err
	}
	return c.encode(), nil
}
