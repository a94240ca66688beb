package nccltopo

import (
	"bytes"
	"fmt"
)

// MaxValueLen is the longest attribute value NCCL's parser reads: it stores a value and its
// closing quote in a 255-byte buffer whose last byte must stay free (xmlGetValue,
// MAX_STR_LEN), so 253 bytes of text.
const MaxValueLen = 253

// maxAttrs is how many attributes of one element NCCL keeps (MAX_ATTR_COUNT); it ignores
// the rest.
const maxAttrs = 16

// attr is one attribute; elements keep them in the order NCCL's own dump writes them.
type attr struct{ key, value string }

// element is one element of the topology file.
type element struct {
	name  string
	attrs []attr
	subs  []*element
}

// checkValue reports why v cannot be an attribute value that NCCL's parser and an XML
// parser read alike: NCCL takes the bytes between the quotes as they are (no entities), so
// nothing that XML would have to escape may appear, and the value must fit NCCL's buffer.
func checkValue(v string) error {
	if len(v) > MaxValueLen {
		return fmt.Errorf("%d bytes long, NCCL reads at most %d", len(v), MaxValueLen)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '&' || c == '<' || c == '>' {
			return fmt.Errorf("byte %q at offset %d is not allowed (printable ASCII without \" & < >)", c, i)
		}
	}
	return nil
}

// check validates every attribute of e and its descendants.
func (e *element) check() error {
	if len(e.attrs) > maxAttrs {
		return fmt.Errorf("<%s> has %d attributes, NCCL keeps %d", e.name, len(e.attrs), maxAttrs)
	}
	for _, a := range e.attrs {
		if err := checkValue(a.value); err != nil {
			return fmt.Errorf("<%s %s=%q>: %w", e.name, a.key, a.value, err)
		}
	}
	for _, s := range e.subs {
		if err := s.check(); err != nil {
			return err
		}
	}
	return nil
}

// encode writes e the way NCCL's own dump does (ncclTopoDumpXmlRec): two spaces of
// indentation per level, attributes separated by one space and quoted with '"', elements
// without children closed with "/>", one element per line. NCCL's parser is no general
// XML parser: it takes no XML declaration, no tabs between elements and no line breaks
// between attributes, so the file holds none.
func (e *element) encode(b *bytes.Buffer, depth int) {
	for range depth {
		b.WriteString("  ")
	}
	b.WriteByte('<')
	b.WriteString(e.name)
	for _, a := range e.attrs {
		b.WriteByte(' ')
		b.WriteString(a.key)
		b.WriteString(`="`)
		b.WriteString(a.value)
		b.WriteByte('"')
	}
	if len(e.subs) == 0 {
		b.WriteString("/>\n")
		return
	}
	b.WriteString(">\n")
	for _, s := range e.subs {
		s.encode(b, depth+1)
	}
	for range depth {
		b.WriteString("  ")
	}
	b.WriteString("</")
	b.WriteString(e.name)
	b.WriteString(">\n")
}

// marshal checks e and returns the file's bytes.
func (e *element) marshal() ([]byte, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	e.encode(&b, 0)
	return b.Bytes(), nil
}
